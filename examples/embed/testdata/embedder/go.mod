module example.com/embedder

go 1.26.0

require github.com/cycled/cycled v0.0.0-00010101000000-000000000000
