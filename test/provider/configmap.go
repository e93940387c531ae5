package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// ServiceAccountDirEnvVar overrides where the Pod's ServiceAccount credentials are read
// from (tests); a Pod has them at the default.
const ServiceAccountDirEnvVar = "STACKWRIGHT_TESTING_SERVICEACCOUNT_DIR"

const defaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ConfigMap manages a ConfigMap through the Kubernetes API with the ambient in-cluster
// credentials of the process (its Pod's ServiceAccount), so a Stack proves what its own
// identity may and may not do.
type ConfigMap struct{}

// ConfigMapArgs are the inputs of a ConfigMap.
type ConfigMapArgs struct {
	Name      string            `pulumi:"name" provider:"replaceOnChanges"`
	Namespace string            `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	Data      map[string]string `pulumi:"data,optional"`
}

// ConfigMapState is the checkpointed state of a ConfigMap.
type ConfigMapState struct {
	Name      string            `pulumi:"name"`
	Namespace string            `pulumi:"namespace"`
	Data      map[string]string `pulumi:"data,optional"`
	UID       string            `pulumi:"uid"`
}

var (
	_ infer.CustomUpdate[ConfigMapArgs, ConfigMapState] = (*ConfigMap)(nil)
	_ infer.CustomDelete[ConfigMapState]                = (*ConfigMap)(nil)
)

// Annotate describes the resource.
func (c *ConfigMap) Annotate(a infer.Annotator) {
	a.SetToken("index", "ConfigMap")
	a.Describe(&c, "A ConfigMap created with the in-cluster credentials of the Pod the provider runs in.")
}

// Annotate describes the inputs.
func (a *ConfigMapArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Name, "Name of the ConfigMap.")
	an.Describe(&a.Namespace, "Namespace of the ConfigMap; defaults to the Pod's own.")
	an.Describe(&a.Data, "Data of the ConfigMap.")
}

// Annotate describes the outputs.
func (s *ConfigMapState) Annotate(a infer.Annotator) {
	a.Describe(&s.UID, "UID the API server gave the ConfigMap.")
}

// Create creates the ConfigMap.
func (*ConfigMap) Create(ctx context.Context, req infer.CreateRequest[ConfigMapArgs]) (infer.CreateResponse[ConfigMapState], error) {
	state := ConfigMapState{Name: req.Inputs.Name, Namespace: req.Inputs.Namespace, Data: req.Inputs.Data}
	api, err := newKubeAPI()
	if err != nil {
		return infer.CreateResponse[ConfigMapState]{}, err
	}
	if state.Namespace == "" {
		state.Namespace = api.namespace
	}
	if req.DryRun {
		return infer.CreateResponse[ConfigMapState]{ID: state.Namespace + "/" + state.Name, Output: state}, nil
	}
	body := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": state.Name, "namespace": state.Namespace},
		"data":     state.Data,
	}
	var created struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := api.do(ctx, http.MethodPost, "/api/v1/namespaces/"+state.Namespace+"/configmaps", body, &created); err != nil {
		return infer.CreateResponse[ConfigMapState]{}, fmt.Errorf("failed to create ConfigMap %s/%s: %w", state.Namespace, state.Name, err)
	}
	state.UID = created.Metadata.UID
	return infer.CreateResponse[ConfigMapState]{ID: state.Namespace + "/" + state.Name, Output: state}, nil
}

// Update replaces the ConfigMap's data.
func (*ConfigMap) Update(ctx context.Context, req infer.UpdateRequest[ConfigMapArgs, ConfigMapState]) (infer.UpdateResponse[ConfigMapState], error) {
	state := req.State
	state.Data = req.Inputs.Data
	if req.DryRun {
		return infer.UpdateResponse[ConfigMapState]{Output: state}, nil
	}
	api, err := newKubeAPI()
	if err != nil {
		return infer.UpdateResponse[ConfigMapState]{}, err
	}
	patch := map[string]any{"data": state.Data}
	if err := api.do(ctx, http.MethodPatch, "/api/v1/namespaces/"+state.Namespace+"/configmaps/"+state.Name, patch, nil); err != nil {
		return infer.UpdateResponse[ConfigMapState]{}, fmt.Errorf("failed to update ConfigMap %s/%s: %w", state.Namespace, state.Name, err)
	}
	return infer.UpdateResponse[ConfigMapState]{Output: state}, nil
}

// Delete deletes the ConfigMap; one already gone is fine.
func (*ConfigMap) Delete(ctx context.Context, req infer.DeleteRequest[ConfigMapState]) (infer.DeleteResponse, error) {
	api, err := newKubeAPI()
	if err != nil {
		return infer.DeleteResponse{}, err
	}
	err = api.do(ctx, http.MethodDelete, "/api/v1/namespaces/"+req.State.Namespace+"/configmaps/"+req.State.Name, nil, nil)
	if err != nil && !strings.Contains(err.Error(), "NotFound") {
		return infer.DeleteResponse{}, fmt.Errorf("failed to delete ConfigMap %s/%s: %w", req.State.Namespace, req.State.Name, err)
	}
	return infer.DeleteResponse{}, nil
}

// kubeAPI is the API server as a Pod sees it: its address from the environment the kubelet
// sets, its CA, and the Pod's ServiceAccount token.
type kubeAPI struct {
	base      string
	token     string
	namespace string
	client    *http.Client
}

func newKubeAPI() (*kubeAPI, error) {
	dir := os.Getenv(ServiceAccountDirEnvVar)
	if dir == "" {
		dir = defaultServiceAccountDir
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("no in-cluster credentials: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not running in a Pod?)")
	}
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		return nil, fmt.Errorf("no in-cluster credentials: %w", err)
	}
	ns, err := os.ReadFile(filepath.Join(dir, "namespace"))
	if err != nil {
		return nil, fmt.Errorf("no in-cluster credentials: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("no in-cluster credentials: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no in-cluster credentials: %s/ca.crt holds no certificate", dir)
	}
	return &kubeAPI{
		base:      "https://" + net.JoinHostPort(host, port),
		token:     strings.TrimSpace(string(token)),
		namespace: strings.TrimSpace(string(ns)),
		client:    &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}},
	}, nil
}

// do sends body as JSON (a merge patch for PATCH) and decodes the answer into out. An
// error answer becomes an error with the API server's reason and message, e.g.
// "Forbidden: configmaps is forbidden: User ... cannot create resource ...".
func (k *kubeAPI) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var status struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &status) == nil && status.Reason != "" {
			return fmt.Errorf("%s: %s", status.Reason, status.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
