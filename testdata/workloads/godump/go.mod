module godump

go 1.21
