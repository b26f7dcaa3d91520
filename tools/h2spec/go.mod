// Builds h2spec, the HTTP/2 conformance tool the gRPC listener's conformance test runs, from the Go module
// proxy. h2spec v2.2.1 predates Go modules (it has no go.mod), so a plain "go install" would resolve its
// imports to whatever is newest that day; this main module pins them (and go.sum their hashes) instead.
// Built by scripts/build-go-tools.sh; see docs/k8s-test-binaries.md.
module example.local/h2spec-bin

go 1.26.0

tool github.com/summerwind/h2spec/cmd/h2spec

require (
	github.com/fatih/color v1.19.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/summerwind/h2spec v2.2.1+incompatible // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
