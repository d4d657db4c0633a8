module target

go 1.22
