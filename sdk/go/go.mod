module github.com/switchyard-dev/switchyard/sdk/go

go 1.19
