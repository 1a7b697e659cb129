package deploy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/pipeline"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // the stages every processor binary has
)

// The parts of the Kubernetes objects the checks read. Everything else
// in the manifests is ignored here.
type (
	meta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	header struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   meta   `yaml:"metadata"`
	}
	selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	statefulSet struct {
		Spec struct {
			ServiceName string   `yaml:"serviceName"`
			Replicas    *int     `yaml:"replicas"`
			Selector    selector `yaml:"selector"`
			Template    struct {
				Metadata meta    `yaml:"metadata"`
				Spec     podSpec `yaml:"spec"`
			} `yaml:"template"`
			VolumeClaimTemplates []struct {
				Metadata meta `yaml:"metadata"`
			} `yaml:"volumeClaimTemplates"`
		} `yaml:"spec"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		} `yaml:"securityContext"`
		Containers []container `yaml:"containers"`
		Volumes    []struct {
			Name      string `yaml:"name"`
			ConfigMap *struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
			Secret *struct {
				SecretName string `yaml:"secretName"`
			} `yaml:"secret"`
		} `yaml:"volumes"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []envVar `yaml:"env"`
		EnvFrom []struct {
			SecretRef *struct {
				Name string `yaml:"name"`
			} `yaml:"secretRef"`
		} `yaml:"envFrom"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		StartupProbe   *probe `yaml:"startupProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	envVar struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *keyRef `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	keyRef struct {
		Name string `yaml:"name"`
		Key  string `yaml:"key"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"` // a number or a port's name
		} `yaml:"httpGet"`
	}
	service struct {
		Spec struct {
			ClusterIP string            `yaml:"clusterIP"`
			Selector  map[string]string `yaml:"selector"`
		} `yaml:"spec"`
	}
	pdb struct {
		Spec struct {
			MaxUnavailable any      `yaml:"maxUnavailable"`
			MinAvailable   any      `yaml:"minAvailable"`
			Selector       selector `yaml:"selector"`
		} `yaml:"spec"`
	}
	configMap struct {
		Data map[string]string `yaml:"data"`
	}
	secret struct {
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
	}
)

// object is one YAML document of a manifest.
type object struct {
	header
	at  string // file and document number, for messages
	src []byte // the document alone, to decode as its kind
}

func (o object) decode(t *testing.T, v any) {
	t.Helper()
	if err := yaml.Unmarshal(o.src, v); err != nil {
		t.Fatalf("%s: %v", o.at, err)
	}
}

// manifests reads every YAML document in dir.
func manifests(t *testing.T, dir string) []object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	var objs []object
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(src))
		for n := 1; ; n++ {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: document %d: %v", f, n, err)
			}
			if doc == nil {
				continue // an empty document (a trailing ---)
			}
			b, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			o := object{at: fmt.Sprintf("%s (document %d)", f, n), src: b}
			o.decode(t, &o.header)
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s: apiVersion, kind and metadata.name are required", o.at)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

// only returns the one object of kind, failing unless there is exactly one.
func only(t *testing.T, objs []object, kind string) object {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s manifests, want 1", len(found), kind)
	}
	return found[0]
}

func named(objs []object, kind, name string) (object, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return object{}, false
}

// image is what the Dockerfile's final stage declares.
type image struct {
	entrypoint []string
	exposed    []string
}

func dockerfile(t *testing.T, file string) image {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var img image
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM": // a new stage: only the last one's counts
			img = image{}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimSpace(line[len(f[0]):])), &img.entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT is not an exec-form JSON list: %v", file, err)
			}
		case "EXPOSE":
			for _, p := range f[1:] {
				img.exposed = append(img.exposed, strings.TrimSuffix(p, "/tcp"))
			}
		}
	}
	if len(img.entrypoint) == 0 {
		t.Fatalf("%s: no ENTRYPOINT in the final stage", file)
	}
	return img
}

// flag returns the last value of --name in args (as pflag takes it:
// "--name v" or "--name=v"; short is the one-letter form, or "").
func flag(args []string, name, short string) (string, bool) {
	val, ok := "", false
	for i, a := range args {
		for _, n := range []string{"--" + name, "-" + short} {
			if n == "-" {
				continue
			}
			if a == n && i+1 < len(args) {
				val, ok = args[i+1], true
			} else if v, cut := strings.CutPrefix(a, n+"="); cut {
				val, ok = v, true
			}
		}
	}
	return val, ok
}

// bytesOf reads a Kubernetes memory quantity (binary suffixes or none)
// or a GOMEMLIMIT value (B, KiB, MiB, GiB).
func bytesOf(t *testing.T, what, s string) int64 {
	t.Helper()
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %q is not a size this test reads (a number with Ki/Mi/Gi or KiB/MiB/GiB)", what, s)
	}
	return n * mult
}

// TestManifests checks that deploy/kubernetes and deploy/Dockerfile fit
// together: the pod's name reaches consumer.group_instance_id, the probes
// reach the address the processor serves, the grace period outlasts
// shutdown_timeout, the memory settings follow buffer_bytes, every Secret
// and ConfigMap referred to exists, and the ConfigMap's app.yaml passes
// the checks of "processor lint" with the environment the pod gets.
func TestManifests(t *testing.T) {
	objs := manifests(t, "kubernetes")
	img := dockerfile(t, "Dockerfile")

	stsObj := only(t, objs, "StatefulSet")
	var sts statefulSet
	stsObj.decode(t, &sts)
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want the processor alone", stsObj.at, len(pod.Containers))
	}
	c := pod.Containers[0]
	if !reflect.DeepEqual(sts.Spec.Selector.MatchLabels, sts.Spec.Template.Metadata.Labels) || len(sts.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("StatefulSet selector %v does not match its pods' labels %v", sts.Spec.Selector.MatchLabels, sts.Spec.Template.Metadata.Labels)
	}
	if r := pod.SecurityContext.RunAsNonRoot; r == nil || !*r {
		t.Error("the pod does not require a non-root user (securityContext.runAsNonRoot: true)")
	}

	// What the container runs: the image's entrypoint unless the
	// manifest replaces it, then the manifest's args.
	argv := img.entrypoint
	if c.Command != nil {
		argv = c.Command
	}
	argv = append(append([]string(nil), argv...), c.Args...)

	// The HTTP address: --http, on every interface, on the port the
	// image exposes, the container declares and the probes use.
	addr, ok := flag(argv, "http", "")
	if !ok {
		t.Fatalf("the container runs %q without --http: the default http.address is 127.0.0.1:9464, which probes cannot reach", argv)
	}
	host, httpPort, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--http %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		t.Errorf("--http %q listens on %q only: probes and scrapers come from outside the container (use 0.0.0.0)", addr, host)
	}
	if !contains(img.exposed, httpPort) {
		t.Errorf("the Dockerfile exposes %v, not the --http port %s", img.exposed, httpPort)
	}
	portOf := func(p any) string { // a number, or a container port's name
		s := fmt.Sprint(p)
		for _, cp := range c.Ports {
			if cp.Name == s {
				return strconv.Itoa(cp.ContainerPort)
			}
		}
		return s
	}
	declared := false
	for _, cp := range c.Ports {
		declared = declared || strconv.Itoa(cp.ContainerPort) == httpPort
	}
	if !declared {
		t.Errorf("the container does not declare port %s (--http)", httpPort)
	}
	for _, pr := range []struct {
		name, path string
		p          *probe
	}{{"livenessProbe", "/healthz", c.LivenessProbe}, {"readinessProbe", "/readyz", c.ReadinessProbe}} {
		switch {
		case pr.p == nil || pr.p.HTTPGet == nil:
			t.Errorf("no %s.httpGet", pr.name)
		case pr.p.HTTPGet.Path != pr.path:
			t.Errorf("%s asks %s, want %s", pr.name, pr.p.HTTPGet.Path, pr.path)
		case portOf(pr.p.HTTPGet.Port) != httpPort:
			t.Errorf("%s asks port %v (%s), the processor serves on %s", pr.name, pr.p.HTTPGet.Port, portOf(pr.p.HTTPGet.Port), httpPort)
		}
	}
	if p := c.StartupProbe; p != nil && (p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || portOf(p.HTTPGet.Port) != httpPort) {
		t.Errorf("startupProbe should ask /healthz on port %s", httpPort)
	}

	// The headless Service the StatefulSet names.
	if svcObj, ok := named(objs, "Service", sts.Spec.ServiceName); !ok {
		t.Errorf("no Service %q (the StatefulSet's serviceName)", sts.Spec.ServiceName)
	} else {
		var svc service
		svcObj.decode(t, &svc)
		if svc.Spec.ClusterIP != "None" {
			t.Errorf("Service %s: clusterIP %q, want None (headless)", sts.Spec.ServiceName, svc.Spec.ClusterIP)
		}
		if !subset(svc.Spec.Selector, sts.Spec.Template.Metadata.Labels) {
			t.Errorf("Service %s selects %v, not the processor's pods", sts.Spec.ServiceName, svc.Spec.Selector)
		}
	}

	// The PodDisruptionBudget: one pod at a time, and the right pods.
	pdbObj := only(t, objs, "PodDisruptionBudget")
	var budget pdb
	pdbObj.decode(t, &budget)
	if fmt.Sprint(budget.Spec.MaxUnavailable) != "1" || budget.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget: maxUnavailable %v, minAvailable %v; want maxUnavailable 1 alone", budget.Spec.MaxUnavailable, budget.Spec.MinAvailable)
	}
	if len(budget.Spec.Selector.MatchLabels) == 0 || !subset(budget.Spec.Selector.MatchLabels, sts.Spec.Template.Metadata.Labels) {
		t.Errorf("PodDisruptionBudget selects %v, not the processor's pods", budget.Spec.Selector.MatchLabels)
	}

	// The state volume, where state.dir will live.
	claims := map[string]bool{}
	for _, v := range sts.Spec.VolumeClaimTemplates {
		claims[v.Metadata.Name] = true
	}
	mounts := map[string]string{} // mount path: volume
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	if v := mounts["/var/lib/fencepost"]; !claims[v] {
		t.Errorf("/var/lib/fencepost is not a volume claim template's mount (mounted: %q, claims: %v)", v, claims)
	}

	// The configuration file: -c names a key of the ConfigMap mounted in
	// its folder.
	file, ok := flag(argv, "config", "c")
	if !ok {
		t.Fatalf("the container runs %q without -c", argv)
	}
	var cmName string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.Name == mounts[path.Dir(file)] {
			cmName = v.ConfigMap.Name
		}
	}
	if cmName == "" {
		t.Fatalf("-c %s: no ConfigMap volume is mounted at %s", file, path.Dir(file))
	}
	cmObj, ok := named(objs, "ConfigMap", cmName)
	if !ok {
		t.Fatalf("the pod mounts ConfigMap %q, which no manifest defines", cmName)
	}
	var cm configMap
	cmObj.decode(t, &cm)
	appYAML, ok := cm.Data[path.Base(file)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s (-c %s)", cmName, path.Base(file), file)
	}

	// The pod's environment, as the kubelet would set it for the first
	// and the last pod; every Secret key referred to must exist.
	secretValue := func(ref keyRef) (string, bool) {
		o, ok := named(objs, "Secret", ref.Name)
		if !ok {
			return "", false
		}
		var s secret
		o.decode(t, &s)
		if v, ok := s.StringData[ref.Key]; ok {
			return v, true
		}
		if v, ok := s.Data[ref.Key]; ok {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				t.Errorf("Secret %s: key %s is not base64: %v", ref.Name, ref.Key, err)
			}
			return string(b), true
		}
		return "", false
	}
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil {
			if _, ok := named(objs, "Secret", ef.SecretRef.Name); !ok {
				t.Errorf("envFrom names Secret %q, which no manifest defines", ef.SecretRef.Name)
			}
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			if _, ok := named(objs, "Secret", v.Secret.SecretName); !ok {
				t.Errorf("volume %s names Secret %q, which no manifest defines", v.Name, v.Secret.SecretName)
			}
		}
	}
	replicas := 1
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	podNameVar := ""
	var cfg *config.Config
	for _, ordinal := range []int{0, replicas - 1} {
		podName := fmt.Sprintf("%s-%d", stsObj.Metadata.Name, ordinal)
		env := map[string]string{}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				env[e.Name] = e.Value
			case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
				env[e.Name], podNameVar = podName, e.Name
			case e.ValueFrom.SecretKeyRef != nil:
				v, ok := secretValue(*e.ValueFrom.SecretKeyRef)
				if !ok {
					t.Errorf("env %s: Secret %q has no key %q in the manifests", e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
				}
				env[e.Name] = v
			default:
				t.Errorf("env %s: a source this test does not know; teach it", e.Name)
			}
		}
		if podNameVar == "" {
			t.Fatal("no env var takes the pod's name (valueFrom.fieldRef.fieldPath: metadata.name)")
		}
		// "processor lint", with the pod's environment and nothing else.
		cfg, err = config.Loader{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}.
			Parse(cmObj.at+": "+path.Base(file), []byte(appYAML))
		if err != nil {
			t.Fatalf("the ConfigMap's %s does not pass lint with the pod's environment:\n%v", path.Base(file), err)
		}
		if ws := cfg.Warnings(); len(ws) > 0 {
			t.Errorf("lint warns about the ConfigMap's %s: %v", path.Base(file), ws)
		}
		// Static membership: each pod is its own member, by its name.
		if got := cfg.Pipeline.Consumer.GroupInstanceID; got != podName {
			t.Errorf("pod %s: consumer.group_instance_id is %q, want the pod's name (write \"${%s}\")", podName, got, podNameVar)
		}
	}
	p := cfg.Pipeline.WithDefaults()

	// The grace period outlasts a graceful stop.
	if pod.TerminationGracePeriodSeconds == nil {
		t.Error("no terminationGracePeriodSeconds: the default, 30s, is not above shutdown_timeout by any margin")
	} else if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace <= p.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v is not above shutdown_timeout %v: the kubelet kills the pod before a graceful stop can end", grace, p.ShutdownTimeout)
	}

	// Memory follows buffer_bytes (docs/operations.md, "Sizing"): the
	// soft limit run would set, and a container that holds the resident
	// set's peak.
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	buffer := int64(p.Consumer.BufferBytes)
	want := 2*buffer + 48*int64(pipeline.MiB)
	if v, ok := env["GOMEMLIMIT"]; !ok {
		t.Error("no GOMEMLIMIT in the container's environment")
	} else if got := bytesOf(t, "GOMEMLIMIT", v); got != want {
		t.Errorf("GOMEMLIMIT %s is %d bytes; buffer_bytes %v asks for 2 x buffer_bytes + 48MiB = %d", v, got, p.Consumer.BufferBytes, want)
	}
	peak := 2*buffer + 64*int64(pipeline.MiB)
	req, lim := c.Resources.Requests["memory"], c.Resources.Limits["memory"]
	if req == "" || lim == "" {
		t.Fatalf("memory request %q and limit %q: set both", req, lim)
	}
	if r := bytesOf(t, "requests.memory", req); r < peak {
		t.Errorf("memory request %s is below the resident peak for buffer_bytes %v, 2 x buffer_bytes + 64MiB = %d bytes", req, p.Consumer.BufferBytes, peak)
	}
	if l := bytesOf(t, "limits.memory", lim); l < bytesOf(t, "requests.memory", req) || l <= want {
		t.Errorf("memory limit %s is below the request %s or GOMEMLIMIT %s", lim, req, env["GOMEMLIMIT"])
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
