module github.com/shoal-mq/shoal

go 1.26
