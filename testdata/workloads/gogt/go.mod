module gogt

go 1.22
