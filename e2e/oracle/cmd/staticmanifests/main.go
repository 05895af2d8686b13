// Command staticmanifests runs the pinned release's static-manifest loader for
// ValidatingAdmissionPolicies (k8s.io/kubernetes/pkg/admission/plugin/policy/manifest/loader,
// LoadValidatingManifestsFromDirectory, the function kube-apiserver calls for the
// ValidatingAdmissionPolicy plugin's staticManifestsDir) on every sub-folder of ROOT and prints
// one JSON line per folder: the error the loader returns, or the names it loaded.
//
// It runs with ROOT as its working directory and passes each folder's bare name, so the file
// paths in the loader's messages are relative ("case/file.yaml"), as vapcheck prints them when
// run the same way. Usage: staticmanifests ROOT
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kubernetes/pkg/admission/plugin/policy/manifest/loader"
)

type result struct {
	Case     string   `json:"case"`
	Error    string   `json:"error,omitempty"`
	Policies []string `json:"policies"`
	Bindings []string `json:"bindings"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: staticmanifests ROOT")
		os.Exit(2)
	}
	if err := os.Chdir(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		r := result{Case: e.Name(), Policies: []string{}, Bindings: []string{}}
		loaded, err := loader.LoadValidatingManifestsFromDirectory(e.Name())
		if err != nil {
			r.Error = err.Error()
		} else {
			for _, p := range loaded.Policies {
				r.Policies = append(r.Policies, p.Name)
			}
			for _, b := range loaded.Bindings {
				r.Bindings = append(r.Bindings, b.Name)
			}
		}
		if err := out.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
