module cshared

go 1.20
