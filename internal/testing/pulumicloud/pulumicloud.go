package pulumicloud

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/esc"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
)

// ciphertextPrefix marks the service secrets provider's "ciphertexts".
const ciphertextPrefix = "pulumicloud-fake:"

// Service is one fake Pulumi Cloud, serving over HTTP on the loopback interface until the
// test ends.
type Service struct {
	// URL is the backend URL (PULUMI_BACKEND_URL), http://127.0.0.1:<port>.
	URL string
	// Org is the only organization; Token the only access token it accepts.
	Org, Token string

	mu         sync.Mutex
	envs       map[string]map[string]any // "project/env" -> its pulumiConfig
	stacks     map[string]*stack         // "project/stack"
	sessions   map[string]esc.Environment
	opened     [][]string
	unanswered []string
	nextID     int
}

type stack struct {
	project, name string
	version       int
	deployment    json.RawMessage // the latest checkpoint's deployment; nil before any
	deplVersion   int
	updates       map[string]update // by ID, until completed
}

type update struct {
	kind, token string
}

// New starts a service for organization org, accepting the access token token.
func New(t testing.TB, org, token string) *Service {
	t.Helper()
	s := &Service{Org: org, Token: token, envs: map[string]map[string]any{}, stacks: map[string]*stack{}, sessions: map[string]esc.Environment{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/user", s.authed(s.user))
	mux.HandleFunc("GET /api/user/organizations/default", s.authed(s.defaultOrg))
	mux.HandleFunc("GET /api/capabilities", s.authed(s.capabilities))
	mux.HandleFunc("POST /api/stacks/{org}/{project}", s.authed(s.createStack))
	mux.HandleFunc("GET /api/stacks/{org}/{project}/{stack}", s.authed(s.getStack))
	mux.HandleFunc("GET /api/stacks/{org}/{project}/{stack}/export", s.authed(s.export))
	mux.HandleFunc("POST /api/stacks/{org}/{project}/{stack}/encrypt", s.authed(s.encrypt))
	mux.HandleFunc("POST /api/stacks/{org}/{project}/{stack}/decrypt", s.authed(s.decrypt))
	mux.HandleFunc("POST /api/stacks/{org}/{project}/{stack}/batch-decrypt", s.authed(s.batchDecrypt))
	// The CLI reports what it decrypted (`stack output --show-secrets`) for the audit log.
	mux.HandleFunc("POST /api/stacks/{org}/{project}/{stack}/decrypt/log-decryption", s.authed(accept))
	mux.HandleFunc("POST /api/stacks/{org}/{project}/{stack}/decrypt/log-batch-decryption", s.authed(accept))
	mux.HandleFunc("POST /api/stacks/{org}/{project}/{stack}/{kind}", s.authed(s.createUpdate))
	mux.HandleFunc("POST /api/stacks/{org}/{project}/{stack}/update/{id}", s.authed(s.startUpdate))
	mux.HandleFunc("/api/stacks/{org}/{project}/{stack}/update/{id}/{action...}", s.updateCall)
	mux.HandleFunc("POST /api/esc/environments/{org}/yaml/open", s.authed(s.openEnvironment))
	mux.HandleFunc("GET /api/esc/environments/{org}/yaml/open/{id}", s.authed(s.openedEnvironment))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.refuse(w, r) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// SetEnvironment makes environment name ("project/env") hold pulumiConfig, JSON-like values
// (strings, float64 or int numbers, booleans, maps and slices of them).
func (s *Service) SetEnvironment(name string, pulumiConfig map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envs[name] = pulumiConfig
}

// Opened returns the import lists the CLI opened, in the order it opened them.
func (s *Service) Opened() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.opened...)
}

// Unanswered returns the requests ("METHOD /path") the fake does not know.
func (s *Service) Unanswered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unanswered...)
}

// authed refuses requests without the access token, as Pulumi Cloud does (401).
func (s *Service) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token "+s.Token {
			writeError(w, http.StatusUnauthorized, "Unauthorized: No credentials provided or are invalid.")
			return
		}
		if r.PathValue("org") != "" && r.PathValue("org") != s.Org {
			writeError(w, http.StatusNotFound, "Organization '"+r.PathValue("org")+"' not found")
			return
		}
		h(w, r)
	}
}

func (s *Service) refuse(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.unanswered = append(s.unanswered, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	writeError(w, http.StatusNotFound, "the fake does not answer "+r.Method+" "+r.URL.Path)
}

func (s *Service) user(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"id": "fake-user", "githubLogin": "stackwright-test", "name": "Stackwright test", "email": "test@stackwright.invalid",
		"organizations": []map[string]string{{"githubLogin": s.Org, "name": s.Org}},
	})
}

func (s *Service) defaultOrg(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, apitype.GetDefaultOrganizationResponse{GitHubLogin: s.Org})
}

func (s *Service) capabilities(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, apitype.CapabilitiesResponse{Capabilities: []apitype.APICapabilityConfig{}})
}

func (s *Service) createStack(w http.ResponseWriter, r *http.Request) {
	var req apitype.CreateStackRequest
	if !readJSON(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := r.PathValue("project") + "/" + req.StackName
	if _, ok := s.stacks[key]; ok {
		writeError(w, http.StatusConflict, fmt.Sprintf("Conflict: stack '%s' already exists", req.StackName))
		return
	}
	s.stacks[key] = &stack{project: r.PathValue("project"), name: req.StackName, updates: map[string]update{}}
	writeJSON(w, apitype.CreateStackResponse{})
}

// stackOf returns the stack the request names, or answers 404 (which the CLI reads as
// "no stack named ... found") and nil. s.mu must be held.
func (s *Service) stackOf(w http.ResponseWriter, r *http.Request) *stack {
	st, ok := s.stacks[r.PathValue("project")+"/"+r.PathValue("stack")]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Stack '%s' not found", r.PathValue("stack")))
		return nil
	}
	return st
}

func (s *Service) getStack(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stackOf(w, r)
	if st == nil {
		return
	}
	writeJSON(w, apitype.Stack{
		ID: s.Org + "/" + st.project + "/" + st.name, OrgName: s.Org, ProjectName: st.project,
		StackName: tokens.QName(st.name), Version: st.version,
	})
}

func (s *Service) export(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stackOf(w, r)
	if st == nil {
		return
	}
	d := apitype.UntypedDeployment{Version: 3, Deployment: json.RawMessage(`{}`)}
	if st.deployment != nil {
		d = apitype.UntypedDeployment{Version: st.deplVersion, Deployment: st.deployment}
	}
	writeJSON(w, d)
}

func (s *Service) encrypt(w http.ResponseWriter, r *http.Request) {
	var req apitype.EncryptValueRequest
	if !readJSON(w, r, &req) {
		return
	}
	writeJSON(w, apitype.EncryptValueResponse{Ciphertext: append([]byte(ciphertextPrefix), req.Plaintext...)})
}

func (s *Service) decrypt(w http.ResponseWriter, r *http.Request) {
	var req apitype.DecryptValueRequest
	if !readJSON(w, r, &req) {
		return
	}
	plain, ok := bytes.CutPrefix(req.Ciphertext, []byte(ciphertextPrefix))
	if !ok {
		writeError(w, http.StatusBadRequest, "not a ciphertext of this service")
		return
	}
	writeJSON(w, apitype.DecryptValueResponse{Plaintext: plain})
}

func (s *Service) batchDecrypt(w http.ResponseWriter, r *http.Request) {
	var req apitype.BatchDecryptRequest
	if !readJSON(w, r, &req) {
		return
	}
	resp := apitype.BatchDecryptResponse{Plaintexts: make(map[string][]byte, len(req.Ciphertexts))}
	for _, c := range req.Ciphertexts {
		plain, ok := bytes.CutPrefix(c, []byte(ciphertextPrefix))
		if !ok {
			writeError(w, http.StatusBadRequest, "not a ciphertext of this service")
			return
		}
		resp.Plaintexts[base64.StdEncoding.EncodeToString(c)] = plain
	}
	writeJSON(w, resp)
}

func (s *Service) createUpdate(w http.ResponseWriter, r *http.Request) {
	switch r.PathValue("kind") {
	case "preview", "update", "refresh", "destroy":
	default:
		s.refuse(w, r)
		return
	}
	var req apitype.UpdateProgramRequest
	if !readJSON(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stackOf(w, r)
	if st == nil {
		return
	}
	s.nextID++
	id := "update-" + strconv.Itoa(s.nextID)
	st.updates[id] = update{kind: r.PathValue("kind"), token: "update-token-" + strconv.Itoa(s.nextID)}
	writeJSON(w, apitype.UpdateProgramResponse{UpdateID: id})
}

func (s *Service) startUpdate(w http.ResponseWriter, r *http.Request) {
	var req apitype.StartUpdateRequest
	if !readJSON(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stackOf(w, r)
	if st == nil {
		return
	}
	u, ok := st.updates[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "Update not found")
		return
	}
	version := st.version
	if u.kind != "preview" {
		version++
	}
	// JournalVersion 0: the CLI sends whole checkpoints instead of journal entries.
	writeJSON(w, apitype.StartUpdateResponse{Version: version, Token: u.token, TokenExpiration: time.Now().Add(time.Hour).Unix()})
}

// updateCall serves the calls an update makes with its own token.
func (s *Service) updateCall(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	st := s.stacks[r.PathValue("project")+"/"+r.PathValue("stack")]
	var u update
	if st != nil {
		u = st.updates[r.PathValue("id")]
	}
	s.mu.Unlock()
	if u.token == "" || r.Header.Get("Authorization") != "update-token "+u.token {
		writeError(w, http.StatusUnauthorized, "Unauthorized: invalid update token")
		return
	}
	switch r.Method + " " + r.PathValue("action") {
	case "POST events/batch":
		writeJSON(w, struct{}{})
	case "POST renew_lease":
		writeJSON(w, apitype.RenewUpdateLeaseResponse{Token: u.token})
	case "PATCH checkpoint":
		var req apitype.PatchUpdateCheckpointRequest
		if !readJSON(w, r, &req) {
			return
		}
		s.mu.Lock()
		st.deployment, st.deplVersion = req.Deployment, req.Version
		s.mu.Unlock()
		writeJSON(w, struct{}{})
	case "POST complete":
		var req apitype.CompleteUpdateRequest
		if !readJSON(w, r, &req) {
			return
		}
		s.mu.Lock()
		delete(st.updates, r.PathValue("id"))
		if u.kind != "preview" {
			st.version++
		}
		s.mu.Unlock()
		writeJSON(w, struct{}{})
	default:
		s.refuse(w, r)
	}
}

// openEnvironment opens the anonymous environment the CLI sends: the stack settings file's
// imports as {"imports": [...]} (workspace.Environment.Definition).
func (s *Service) openEnvironment(w http.ResponseWriter, r *http.Request) {
	var def struct {
		Imports []string `json:"imports"`
	}
	if !readJSON(w, r, &def) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened = append(s.opened, def.Imports)
	merged := map[string]any{}
	for _, name := range def.Imports {
		if !strings.Contains(name, "/") {
			name = "default/" + name
		}
		cfg, ok := s.envs[name]
		if !ok {
			// The CLI prints the diagnostics of a 400 and fails with "too many errors".
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{
				"code": http.StatusBadRequest, "message": "invalid environment",
				"diagnostics": []map[string]string{{"summary": fmt.Sprintf("the fake has no environment %q", name)}},
			})
			return
		}
		merged = merge(merged, cfg)
	}
	s.nextID++
	id := "open-" + strconv.Itoa(s.nextID)
	s.sessions[id] = esc.Environment{Properties: map[string]esc.Value{"pulumiConfig": value(merged)}}
	writeJSON(w, map[string]string{"id": id})
}

func (s *Service) openedEnvironment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	env, ok := s.sessions[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "open session not found")
		return
	}
	writeJSON(w, env)
}

// merge lays b over a: objects key by key, anything else replaced, as ESC merges an
// environment's imports.
func merge(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = merge(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// value converts a JSON-like value to ESC's representation.
func value(v any) esc.Value {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]esc.Value, len(v))
		for k, e := range v {
			m[k] = value(e)
		}
		return esc.NewValue(m)
	case []any:
		l := make([]esc.Value, len(v))
		for i, e := range v {
			l[i] = value(e)
		}
		return esc.NewValue(l)
	case int:
		return esc.NewValue(json.Number(strconv.Itoa(v)))
	case float64:
		return esc.NewValue(json.Number(strconv.FormatFloat(v, 'g', -1, 64)))
	case string:
		return esc.NewValue(v)
	case bool:
		return esc.NewValue(v)
	}
	return esc.Value{}
}

// readJSON decodes the request's body, gzipped or not, or answers 400 and returns false.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad gzip body: "+err.Error())
			return false
		}
		defer zr.Close()
		body = zr
	}
	b, err := io.ReadAll(body)
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

func accept(w http.ResponseWriter, _ *http.Request) { writeJSON(w, struct{}{}) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(apitype.ErrorResponse{Code: code, Message: msg})
}
