package provider

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// fakeAPIServer answers like the API server for a ServiceAccount that may create
// ConfigMaps in its own namespace "team" and nowhere else.
func fakeAPIServer(t *testing.T) {
	t.Helper()
	fakeInCluster(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/team/configmaps" {
			_, _ = w.Write([]byte(`{"metadata":{"uid":"uid-1"}}`))
			return
		}
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","reason":"Forbidden","message":"configmaps is forbidden: User \"system:serviceaccount:team:default\" cannot create resource \"configmaps\" in the namespace \"other\""}`))
	}))
}

// fakeInCluster runs api as the API server over TLS and gives the process the in-cluster
// credentials of a Pod in namespace "team" whose ServiceAccount token is "sa-token": the
// address, the CA and the token. Requests without that token are refused before api sees
// them.
func fakeInCluster(t *testing.T, api http.Handler) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sa-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for name, content := range map[string]string{"token": "sa-token\n", "namespace": "team", "ca.crt": string(ca)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(ServiceAccountDirEnvVar, dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
}

func TestConfigMap_Create_UsesPodIdentity(t *testing.T) {
	fakeAPIServer(t)
	for _, tc := range []struct {
		name, namespace, wantErr, wantUID string
	}{
		{name: "own namespace by default", wantUID: "uid-1"},
		{name: "other namespace forbidden", namespace: "other", wantErr: "Forbidden: configmaps is forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := (&ConfigMap{}).Create(t.Context(), infer.CreateRequest[ConfigMapArgs]{
				Name: "cm", Inputs: ConfigMapArgs{Name: "cm", Namespace: tc.namespace, Data: map[string]string{"a": "1"}},
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Output.UID != tc.wantUID || resp.Output.Namespace != "team" {
				t.Errorf("state = %+v", resp.Output)
			}
		})
	}
}

func TestConfigMap_Create_OutsideAPodFailsClearly(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := (&ConfigMap{}).Create(t.Context(), infer.CreateRequest[ConfigMapArgs]{Inputs: ConfigMapArgs{Name: "cm"}})
	if err == nil || !strings.Contains(err.Error(), "no in-cluster credentials") {
		t.Fatalf("error = %v", err)
	}
}

// Explicit credentials in the environment replace the Pod's: no ServiceAccount directory
// is read.
func TestConfigMap_Create_ExplicitCredentials(t *testing.T) {
	fakeAPIServer(t)
	dir := os.Getenv(ServiceAccountDirEnvVar)
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(ServiceAccountDirEnvVar, t.TempDir())
	t.Setenv(TokenEnvVar, "sa-token")
	t.Setenv(CAEnvVar, string(ca))
	resp, err := (&ConfigMap{}).Create(t.Context(), infer.CreateRequest[ConfigMapArgs]{
		Name: "cm", Inputs: ConfigMapArgs{Name: "cm", Namespace: "team"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Output.UID != "uid-1" {
		t.Errorf("state = %+v", resp.Output)
	}
	t.Setenv(TokenEnvVar, "wrong-token")
	if _, err := (&ConfigMap{}).Create(t.Context(), infer.CreateRequest[ConfigMapArgs]{Inputs: ConfigMapArgs{Name: "cm", Namespace: "team"}}); err == nil {
		t.Error("a wrong token was accepted: the explicit token was not used")
	}
}

// Read reports the ConfigMap as the API server has it, so a drift check sees a hand edit,
// and reports a deleted one as gone.
func TestConfigMap_Read_ReportsTheLiveObject(t *testing.T) {
	fakeInCluster(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/namespaces/team/configmaps/edited":
			_, _ = w.Write([]byte(`{"metadata":{"uid":"uid-2"},"data":{"a":"changed by hand"}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","reason":"NotFound","message":"configmaps \"gone\" not found"}`))
		}
	}))
	for _, tc := range []struct {
		name, cm, wantID string
		wantData         map[string]string
	}{
		{name: "edited by hand", cm: "edited", wantID: "team/edited", wantData: map[string]string{"a": "changed by hand"}},
		{name: "deleted", cm: "gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := (&ConfigMap{}).Read(t.Context(), infer.ReadRequest[ConfigMapArgs, ConfigMapState]{
				ID: "team/" + tc.cm, State: ConfigMapState{Name: tc.cm, Namespace: "team", Data: map[string]string{"a": "1"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.ID != tc.wantID || len(resp.Inputs.Data) != len(tc.wantData) || resp.Inputs.Data["a"] != tc.wantData["a"] || resp.State.Data["a"] != tc.wantData["a"] {
				t.Errorf("Read() = %+v, want ID %q and data %v", resp, tc.wantID, tc.wantData)
			}
		})
	}
}
