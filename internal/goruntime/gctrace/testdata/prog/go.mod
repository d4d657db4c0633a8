module gctraceprog

go 1.16
