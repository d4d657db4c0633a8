module goparked

go 1.20
