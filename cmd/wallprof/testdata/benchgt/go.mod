module example.com/benchgt

go 1.26
