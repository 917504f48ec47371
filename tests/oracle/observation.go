package main

// The "observe" op: the digest helm-controller v1.6.3 records as a status.history snapshot's digest, for a
// release as helm stores it. helm-controller's own module cannot be built here (the Go module proxy refuses it),
// so Observation below is written from its source: internal/release/observation.go (the Observation struct, its
// JSON tags, ObserveRelease and IgnoreHookTestEvents) and internal/release/digest.go (Digest: a json.Encoder
// writing into the hash). The release is read by helm's own types (pkg/release/v1 Release, as
// pkg/storage/driver decodeRelease unmarshals it), so Info, Hook and Metadata encode as helm's code does.
//
//	{"op": "observe", "object": {release JSON}, "ociDigest": "sha256:..." (optional)}
//	  -> {"digest": "sha256:...", "text": what it hashes}
//
// ociDigest is what internal/reconcile/release.go mutateOCIDigest sets on the Observation of a release whose chart
// came from an OCIRepository (the HelmRelease's status.lastAttemptedRevisionDigest).

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/opencontainers/go-digest"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
)

// observation has helm-controller's Observation's fields, in its order, with its JSON tags (Action is `json:"-"`).
type observation struct {
	Name          string             `json:"name"`
	Version       int                `json:"version"`
	Info          helmrelease.Info   `json:"info"`
	ChartMetadata chart.Metadata     `json:"chartMetadata"`
	Config        map[string]any     `json:"config"`
	Manifest      string             `json:"manifest"`
	Hooks         []helmrelease.Hook `json:"hooks"`
	Namespace     string             `json:"namespace"`
	OCIDigest     string             `json:"ociDigest,omitempty"`
}

func observe(raw json.RawMessage, ociDigest string) map[string]any {
	var rel helmrelease.Release
	if err := json.Unmarshal(raw, &rel); err != nil {
		return map[string]any{"error": err.Error()}
	}
	obs := observation{Name: rel.Name, Version: rel.Version, Manifest: rel.Manifest, Namespace: rel.Namespace,
		OCIDigest: ociDigest}
	if rel.Info != nil {
		obs.Info = *rel.Info
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		obs.ChartMetadata = *rel.Chart.Metadata
	}
	if len(rel.Config) > 0 {
		obs.Config = rel.Config
	}
	// IgnoreHookTestEvents: a hook firing on "test" is left out; none left is a nil slice.
	var hooks []helmrelease.Hook
	for _, h := range rel.Hooks {
		if !slices.Contains(h.Events, helmrelease.HookTest) {
			hooks = append(hooks, *h)
		}
	}
	obs.Hooks = hooks
	digester := digest.Canonical.Digester()
	var text bytes.Buffer
	enc := json.NewEncoder(&text)
	if err := enc.Encode(obs); err != nil {
		return map[string]any{"error": err.Error()}
	}
	digester.Hash().Write(text.Bytes())
	return map[string]any{"digest": digester.Digest().String(), "text": text.String()}
}
