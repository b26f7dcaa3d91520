// eg-check reads Kubernetes manifests (YAML streams) and decodes each Envoy Gateway object into Envoy
// Gateway's own Go API types with strict decoding: an unknown or misspelt field, or a value of the wrong
// type, is an error. EnvoyGateway (the gateway's configuration file), BackendTrafficPolicy and
// EnvoyExtensionPolicy are checked; other kinds are listed as skipped. Exit 0 when every checked object decodes, 1 otherwise.
//
// Usage: eg-check <file.yaml>...
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func check(doc []byte) (string, error) {
	var tm typeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", err
	}
	if tm.APIVersion != "gateway.envoyproxy.io/v1alpha1" {
		return "skipped " + tm.APIVersion + " " + tm.Kind, nil
	}
	var obj any
	switch tm.Kind {
	case "EnvoyGateway":
		obj = &egv1a1.EnvoyGateway{}
	case "BackendTrafficPolicy":
		obj = &egv1a1.BackendTrafficPolicy{}
	case "EnvoyExtensionPolicy":
		obj = &egv1a1.EnvoyExtensionPolicy{}
	default:
		return "skipped " + tm.Kind, nil
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return "", fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return "ok " + tm.Kind, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: eg-check <file.yaml>...")
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
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 1; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fmt.Printf("%s#%d: error: %v\n", path, i, err)
				failed = true
				break
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			what, err := check(doc)
			if err != nil {
				fmt.Printf("%s#%d: error: %v\n", path, i, err)
				failed = true
				continue
			}
			fmt.Printf("%s#%d: %s\n", path, i, what)
		}
	}
	if failed {
		os.Exit(1)
	}
}
