module cgocall

go 1.22
