// istio-check: decodes Istio EnvoyFilter manifests into Istio's own API types, strictly
// (examples/envoy/istio-envoyfilter.yaml, e2e/envoy-examples.test.ts). Built by scripts/build-go-tools.sh
// from the Go module proxy; scripts/build-go-tools.sh pins the same istio.io/api version.
module github.com/envoy-ratelimit-ts/tools/istio-check

go 1.24.0

require (
	google.golang.org/protobuf v1.36.11
	istio.io/api v1.32.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/golang/protobuf v1.5.4 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20251213004720-97cd9d5aeac2 // indirect
)
