package provider

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
)

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
	_ infer.CustomRead[ConfigMapArgs, ConfigMapState]   = (*ConfigMap)(nil)
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

// Read reports the ConfigMap as the API server has it, so that a refresh (and a drift
// check) sees a change made behind the stack's back. A missing ConfigMap yields an empty
// ID, which tells the engine the resource is gone.
func (*ConfigMap) Read(ctx context.Context, req infer.ReadRequest[ConfigMapArgs, ConfigMapState]) (infer.ReadResponse[ConfigMapArgs, ConfigMapState], error) {
	state := req.State
	if state.Name == "" {
		// An import knows only the ID, namespace/name.
		state.Namespace, state.Name, _ = strings.Cut(req.ID, "/")
	}
	api, err := newKubeAPI()
	if err != nil {
		return infer.ReadResponse[ConfigMapArgs, ConfigMapState]{}, err
	}
	var live struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	err = api.do(ctx, http.MethodGet, "/api/v1/namespaces/"+state.Namespace+"/configmaps/"+state.Name, nil, &live)
	if err != nil && strings.Contains(err.Error(), "NotFound") {
		return infer.ReadResponse[ConfigMapArgs, ConfigMapState]{}, nil
	}
	if err != nil {
		return infer.ReadResponse[ConfigMapArgs, ConfigMapState]{}, fmt.Errorf("failed to read ConfigMap %s/%s: %w", state.Namespace, state.Name, err)
	}
	state.Data, state.UID = live.Data, live.Metadata.UID
	return infer.ReadResponse[ConfigMapArgs, ConfigMapState]{
		ID:     req.ID,
		Inputs: ConfigMapArgs{Name: state.Name, Namespace: state.Namespace, Data: live.Data},
		State:  state,
	}, nil
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
