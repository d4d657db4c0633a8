module searchserver

go 1.26
