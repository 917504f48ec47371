// Command oracle answers questions from Flux's own library code, so that helmdeck's tests can compare
// helmdeck's functions with Flux's on generated inputs (tests/flux_oracle.py starts it once per test
// session). It imports the Flux modules helm-controller v1.6.3 runs (go.mod says which).
//
// One JSON request per line on stdin, one JSON answer per line on stdout, in order:
//
//	{"op": "values", "namespace": "ns", "objects": [{"kind": "ConfigMap", "name": "a", "data": {"k": "text"}}],
//	 "refs": [{"kind": "ConfigMap", "name": "a", "valuesKey": "k", "targetPath": "x.y", "optional": false,
//	           "literal": false}], "values": {...}}
//	    chartutil.ChartValuesFromReferences over controller-runtime's fake client holding the objects
//	    -> {"values": {...}, "digest": "sha256:..."} or {"error": "...", "reason": "ResourceNotFound"}
//	{"op": "readValues", "text": "a: y"}             helm's common.ReadValues -> {"values": {...}} or {"error"}
//	{"op": "digest", "values": {...}}               chartutil.DigestValues(sha256) -> {"digest": "sha256:...",
//	    "text": what it hashes, chartutil.Encode with SortMapSlice}
//	{"op": "parseVersion", "versions": ["1.2"]}     version.ParseVersion -> {"versions": [{"ok", "version"}]}
//	{"op": "choose", "versions": [...], "range": "", "tags": false} the version source-controller picks from a
//	    Helm repository index or an OCI repository's tags ("tags": an OCIRepository's ref.semver)
//	    -> {"chosen": "1.2.3"} or {"error": "..."}
//	{"op": "substitute", "object": "<YAML>", "vars": {...}, "strict": true}
//	    kustomize.SubstituteVariables with spec.postBuild.substitute = vars -> {"object": {...}},
//	    {"object": null} when the object opts out, or {"error": "..."}; with "text", the object as
//	    kustomize prints it (what `kustomize build` prints, and the text envsubst reads)
//	{"op": "helmRelease", "object": {...}}          the defaults and getters of helm-controller/api/v2
//	    (activeRetry: GetActiveRetry of the object's status.lastAttemptedReleaseAction)
//
// Any answer may instead be {"error": "..."} for a request that cannot be read, or {"error", "panic": true}
// where Flux's code panicked. The program holds no Flux
// code: it imports Flux's modules and calls them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/kustomize"
	"github.com/fluxcd/pkg/version"
	"github.com/go-logr/logr"
	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/kustomize/api/provider"
)

type object struct {
	Kind string            `json:"kind"`
	Name string            `json:"name"`
	Data map[string]string `json:"data"`
}

type request struct {
	Op        string                 `json:"op"`
	Namespace string                 `json:"namespace"`
	Objects   []object               `json:"objects"`
	Refs      []meta.ValuesReference `json:"refs"`
	Values    map[string]any         `json:"values"`
	Text      string                 `json:"text"`
	Versions  []string               `json:"versions"`
	Range     string                 `json:"range"`
	Object    json.RawMessage        `json:"object"`
	Vars      map[string]string      `json:"vars"`
	Strict    bool                   `json:"strict"`
	Tags      bool                   `json:"tags"`
	OCIDigest string                 `json:"ociDigest"`
}

var scheme = runtime.NewScheme()

func main() {
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		var answer any
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			answer = map[string]any{"error": "bad request: " + err.Error()}
		} else {
			answer = handle(req)
		}
		if err := enc.Encode(answer); err != nil {
			_ = enc.Encode(map[string]any{"error": "cannot encode the answer: " + err.Error()})
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
}

func handle(req request) (answer map[string]any) {
	// A panic in Flux's code (helm's strvals asserts the types it walks through) is an answer too: in the
	// controller it fails the reconciliation.
	defer func() {
		if r := recover(); r != nil {
			answer = map[string]any{"error": fmt.Sprintf("panic: %v", r), "panic": true}
		}
	}()
	switch req.Op {
	case "values":
		return values(req)
	case "readValues":
		vals, err := common.ReadValues([]byte(req.Text))
		if err != nil {
			return map[string]any{"error": err.Error()}
		}
		return map[string]any{"values": vals}
	case "digest":
		var text strings.Builder
		if len(req.Values) > 0 {
			if err := chartutil.Encode(&text, req.Values, chartutil.SortMapSlice); err != nil {
				return map[string]any{"error": err.Error()}
			}
		}
		return map[string]any{"digest": chartutil.DigestValues(digest.Canonical, req.Values).String(),
			"text": text.String()}
	case "parseVersion":
		return parseVersions(req.Versions)
	case "choose":
		return choose(req.Versions, req.Range, req.Tags)
	case "substitute":
		return substitute(req)
	case "helmRelease":
		return helmRelease(req.Object)
	case "observe":
		return observe(req.Object, req.OCIDigest) // observation.go
	}
	return map[string]any{"error": fmt.Sprintf("unknown op %q", req.Op)}
}

// values runs ChartValuesFromReferences with the objects in a fake API server.
func values(req request) map[string]any {
	builder := fake.NewClientBuilder().WithScheme(scheme)
	for _, o := range req.Objects {
		om := metav1.ObjectMeta{Name: o.Name, Namespace: req.Namespace}
		switch o.Kind {
		case "ConfigMap":
			builder = builder.WithObjects(&corev1.ConfigMap{ObjectMeta: om, Data: o.Data})
		case "Secret":
			data := make(map[string][]byte, len(o.Data))
			for k, v := range o.Data {
				data[k] = []byte(v)
			}
			builder = builder.WithObjects(&corev1.Secret{ObjectMeta: om, Data: data})
		default:
			return map[string]any{"error": fmt.Sprintf("object kind %q", o.Kind)}
		}
	}
	var c client.Client = builder.Build()
	vals, err := chartutil.ChartValuesFromReferences(context.Background(), logr.Discard(), c, req.Namespace,
		req.Values, req.Refs...)
	if err != nil {
		return map[string]any{"error": err.Error(), "reason": reason(err)}
	}
	return map[string]any{"values": vals, "digest": chartutil.DigestValues(digest.Canonical, vals).String()}
}

func reason(err error) string {
	for _, r := range []struct {
		name string
		err  error
	}{
		{"ResourceNotFound", chartutil.ErrResourceNotFound},
		{"KeyNotFound", chartutil.ErrKeyNotFound},
		{"ValuesDataRead", chartutil.ErrValuesDataRead},
		{"ValueMerge", chartutil.ErrValueMerge},
		{"UnsupportedRefKind", chartutil.ErrUnsupportedRefKind},
	} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "Unknown"
}

func parseVersions(texts []string) map[string]any {
	out := make([]map[string]any, 0, len(texts))
	for _, t := range texts {
		v, err := version.ParseVersion(t)
		if err != nil {
			out = append(out, map[string]any{"ok": false, "error": err.Error()})
			continue
		}
		out = append(out, map[string]any{"ok": true, "version": v.String()})
	}
	return map[string]any{"versions": out}
}

// choose picks as source-controller does from a Helm repository index (internal/helm/repository,
// ChartRepository.getChartVersion) and from OCI tags (OCIChartRepository.getLastMatchingVersionOrConstraint):
// the version string equal to the range first; else the range ("" and "*": every stable version) parsed by
// Masterminds' NewConstraint, the versions ParseVersion reads and the range allows, the highest. Both sort
// with the library's own order; the fluxcd/pkg/version.Sort helper does the filtering and sorting. With tags,
// an OCIRepository's spec.ref.semver (internal/controller/ocirepository_controller.go getTagBySemver): the
// range only, no exact match first.
func choose(versions []string, rng string, tags bool) map[string]any {
	if rng != "" && !tags {
		for _, v := range versions {
			if v == rng {
				return map[string]any{"chosen": v}
			}
		}
	}
	expr := rng
	if expr == "" {
		expr = "*"
	}
	c, err := semver.NewConstraint(expr)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	sorted := version.Sort(c, versions)
	if len(sorted) == 0 {
		return map[string]any{"chosen": nil}
	}
	return map[string]any{"chosen": sorted[0]}
}

func substitute(req request) map[string]any {
	res, err := provider.NewDefaultDepProvider().GetResourceFactory().FromBytes([]byte(req.Text))
	if err != nil {
		return map[string]any{"error": "object: " + err.Error(), "unreadable": true}
	}
	vars := make(map[string]any, len(req.Vars))
	for k, v := range req.Vars {
		vars[k] = v
	}
	ks := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
		"kind":       "Kustomization",
		"metadata":   map[string]any{"name": "oracle", "namespace": "default"},
		"spec":       map[string]any{"postBuild": map[string]any{"substitute": vars}},
	}}
	// The text envsubst reads: the object as kustomize prints it (quotes it needs not are gone).
	text, err := res.AsYAML()
	if err != nil {
		return map[string]any{"error": "object: " + err.Error(), "unreadable": true}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	out, err := kustomize.SubstituteVariables(context.Background(), c, ks, res,
		kustomize.SubstituteWithDryRun(true), kustomize.SubstituteWithStrict(req.Strict))
	if err != nil {
		return map[string]any{"error": err.Error(), "text": string(text)}
	}
	if out == nil {
		return map[string]any{"object": nil, "text": string(text)}
	}
	m, err := out.Map()
	if err != nil {
		return map[string]any{"error": "result: " + err.Error()}
	}
	return map[string]any{"object": m, "text": string(text)}
}

func helmRelease(raw json.RawMessage) map[string]any {
	var hr helmv2.HelmRelease
	if err := json.Unmarshal(raw, &hr); err != nil {
		return map[string]any{"error": err.Error()}
	}
	install, upgrade, test, rollback, uninstall := hr.GetInstall(), hr.GetUpgrade(), hr.GetTest(), hr.GetRollback(),
		hr.GetUninstall()
	timeout := hr.GetTimeout()
	ir, ur := install.GetRemediation(), upgrade.GetRemediation()
	retry := func(r helmv2.Retry) any {
		if r == nil {
			return nil
		}
		return map[string]any{"retryInterval": r.GetRetryInterval().Seconds()}
	}
	filters := []map[string]any{}
	for _, f := range test.GetFilters() {
		filters = append(filters, map[string]any{"name": f.Name, "exclude": f.Exclude})
	}
	drift := hr.GetDriftDetection()
	return map[string]any{"getters": map[string]any{
		"releaseName":                     hr.GetReleaseName(),
		"releaseNamespace":                hr.GetReleaseNamespace(),
		"storageNamespace":                hr.GetStorageNamespace(),
		"timeout":                         timeout.Seconds(),
		"maxHistory":                      hr.GetMaxHistory(),
		"interval":                        hr.GetRequeueAfter().Seconds(),
		"persistentClient":                hr.UsePersistentClient(),
		"waitStrategy":                    string(hr.GetWaitStrategy()),
		"postRenderStrategy":              string(hr.GetPostRenderStrategy()),
		"values":                          hr.GetValues(),
		"driftDetection.mode":             string(drift.Mode),
		"install.timeout":                 install.GetTimeout(timeout).Seconds(),
		"install.crds":                    string(install.CRDs),
		"install.createNamespace":         install.CreateNamespace,
		"install.disableWait":             install.GetDisableWait(),
		"install.disableWaitForJobs":      install.DisableWaitForJobs,
		"install.disableHooks":            install.DisableHooks,
		"install.replace":                 install.Replace,
		"install.remediation.retries":     ir.GetRetries(),
		"install.remediation.strategy":    string(ir.GetStrategy()),
		"install.remediateLastFailure":    ir.MustRemediateLastFailure(),
		"install.ignoreTestFailures":      ir.MustIgnoreTestFailures(test.IgnoreFailures),
		"install.retry":                   retry(install.GetRetry(false)),
		"upgrade.timeout":                 upgrade.GetTimeout(timeout).Seconds(),
		"upgrade.crds":                    string(upgrade.CRDs),
		"upgrade.force":                   upgrade.Force,
		"upgrade.cleanupOnFail":           upgrade.CleanupOnFail,
		"upgrade.preserveValues":          upgrade.PreserveValues,
		"upgrade.disableWait":             upgrade.GetDisableWait(),
		"upgrade.disableWaitForJobs":      upgrade.DisableWaitForJobs,
		"upgrade.disableHooks":            upgrade.DisableHooks,
		"upgrade.chartNameChangeStrategy": string(upgrade.GetChartNameChangeStrategy()),
		"upgrade.remediation.retries":     ur.GetRetries(),
		"upgrade.remediation.strategy":    string(ur.GetStrategy()),
		"upgrade.remediateLastFailure":    ur.MustRemediateLastFailure(),
		"upgrade.ignoreTestFailures":      ur.MustIgnoreTestFailures(test.IgnoreFailures),
		"upgrade.retry":                   retry(upgrade.GetRetry(false)),
		"activeRetry":                     retry(hr.GetActiveRetry(false)),
		"test.enable":                     test.Enable,
		"test.ignoreFailures":             test.IgnoreFailures,
		"test.timeout":                    test.GetTimeout(timeout).Seconds(),
		"test.filters":                    filters,
		"rollback.timeout":                rollback.GetTimeout(timeout).Seconds(),
		"rollback.force":                  rollback.Force,
		"rollback.recreate":               rollback.Recreate,
		"rollback.cleanupOnFail":          rollback.CleanupOnFail,
		"rollback.disableWait":            rollback.GetDisableWait(),
		"rollback.disableWaitForJobs":     rollback.DisableWaitForJobs,
		"rollback.disableHooks":           rollback.DisableHooks,
		"uninstall.timeout":               uninstall.GetTimeout(timeout).Seconds(),
		"uninstall.keepHistory":           uninstall.KeepHistory,
		"uninstall.disableWait":           uninstall.GetDisableWait(),
		"uninstall.disableHooks":          uninstall.DisableHooks,
		"uninstall.deletionPropagation":   uninstall.GetDeletionPropagation(),
		"chart.version":                   chartVersion(&hr),
		"suspend":                         hr.Spec.Suspend,
		"dependsOn":                       len(hr.GetDependsOn()),
		"chartTemplate.reconcileStrategy": reconcileStrategy(&hr),
		"chartTemplate.interval":          templateInterval(&hr),
		"helmChartTemplateReference":      chartTemplateRef(&hr),
	}}
}

// crdDefault is the value the API server gives an unset field from the CRD's default (a kubebuilder
// default marker of api/v2 at v1.6.3, which has no getter for it): what helm-controller reads.
func crdDefault(value, def string) string {
	if value == "" {
		return def
	}
	return value
}

// chartVersion is spec.chart.spec.version (api/v2 HelmChartTemplateSpec.Version, CRD default "*").
func chartVersion(hr *helmv2.HelmRelease) any {
	if hr.Spec.Chart == nil {
		return nil
	}
	return crdDefault(hr.Spec.Chart.Spec.Version, "*")
}

// reconcileStrategy is spec.chart.spec.reconcileStrategy (CRD default ChartVersion).
func reconcileStrategy(hr *helmv2.HelmRelease) any {
	if hr.Spec.Chart == nil {
		return nil
	}
	return crdDefault(hr.Spec.Chart.Spec.ReconcileStrategy, "ChartVersion")
}

// templateInterval is the HelmChart's interval as internal/reconcile/helmchart_template.go
// buildHelmChartFromTemplate sets it: HelmChartTemplate.GetInterval(spec.interval).
func templateInterval(hr *helmv2.HelmRelease) any {
	if hr.Spec.Chart == nil {
		return hr.Spec.Interval.Seconds()
	}
	return hr.Spec.Chart.GetInterval(hr.Spec.Interval).Seconds()
}

// chartTemplateRef is the HelmChart helm-controller makes from spec.chart (helmchart_template.go Reconcile:
// GetHelmChartName in HelmChartTemplate.GetNamespace).
func chartTemplateRef(hr *helmv2.HelmRelease) any {
	if hr.Spec.Chart == nil {
		return nil
	}
	return strings.Join([]string{"HelmChart", hr.Spec.Chart.GetNamespace(hr.Namespace), hr.GetHelmChartName()}, "/")
}
