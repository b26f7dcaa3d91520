// istio-check reads Kubernetes manifests (YAML streams) and decodes each Istio EnvoyFilter into Istio's
// own API type (istio.io/api networking.v1alpha3.EnvoyFilter, the message behind the CRD) with
// protojson, which refuses an unknown or misspelt field, a wrong enum name or a value of the wrong type.
// The object around the spec is decoded strictly too (apiVersion, kind, metadata, spec only). The patch
// values are google.protobuf.Struct here; e2e/envoy-examples.test.ts decodes them as Envoy's messages.
// Other kinds are listed as skipped. Exit 0 when every checked object decodes, 1 otherwise.
//
// Usage: istio-check <file.yaml>...
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"
)

type object struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   json.RawMessage `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

func check(doc []byte) (string, error) {
	var obj object
	if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
		return "", err
	}
	if !strings.HasPrefix(obj.APIVersion, "networking.istio.io/") {
		return "skipped " + obj.APIVersion + " " + obj.Kind, nil
	}
	if obj.Kind != "EnvoyFilter" {
		return "skipped " + obj.Kind, nil
	}
	var spec networking.EnvoyFilter
	if err := (protojson.UnmarshalOptions{}).Unmarshal(obj.Spec, &spec); err != nil {
		return "", fmt.Errorf("%s: spec: %w", obj.Kind, err)
	}
	if len(spec.GetConfigPatches()) == 0 {
		return "", fmt.Errorf("%s: spec: no configPatches", obj.Kind)
	}
	return "ok " + obj.Kind, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: istio-check <file.yaml>...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
			continue
		}
		for i, doc := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			what, err := check(doc)
			if err != nil {
				fmt.Printf("%s#%d: error: %v\n", path, i+1, err)
				failed = true
				continue
			}
			fmt.Printf("%s#%d: %s\n", path, i+1, what)
		}
	}
	if failed {
		os.Exit(1)
	}
}
