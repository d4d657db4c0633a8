module github.com/wallprof/wallprof

go 1.26.8
