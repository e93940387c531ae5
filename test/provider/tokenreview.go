package provider

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// TokenReview has the API server review a token file, such as a projected ServiceAccount
// token a Stack asked for: it proves that the token reached the program, and that the API
// server issued it for the expected audience and identity.
type TokenReview struct{}

// TokenReviewArgs are the inputs of a TokenReview. Exactly one of TokenFile and TokenEnv
// is set.
type TokenReviewArgs struct {
	TokenFile string `pulumi:"tokenFile,optional" provider:"replaceOnChanges"`
	TokenEnv  string `pulumi:"tokenEnv,optional" provider:"replaceOnChanges"`
	Audience  string `pulumi:"audience" provider:"replaceOnChanges"`
}

// TokenReviewState is the checkpointed state of a TokenReview. The token itself is never
// kept.
type TokenReviewState struct {
	TokenFile string   `pulumi:"tokenFile,optional"`
	TokenEnv  string   `pulumi:"tokenEnv,optional"`
	Audience  string   `pulumi:"audience"`
	Path      string   `pulumi:"path"`
	Username  string   `pulumi:"username"`
	Audiences []string `pulumi:"audiences"`
}

var _ infer.CustomCheck[TokenReviewArgs] = (*TokenReview)(nil)

// Annotate describes the resource.
func (r *TokenReview) Annotate(a infer.Annotator) {
	a.SetToken("index", "TokenReview")
	a.Describe(&r, "On create, reads a token file and has the API server review it "+
		"(authentication.k8s.io/v1 TokenReview, with the Pod's in-cluster credentials) for one audience; "+
		"fails unless the token is authenticated for that audience. The Pod's ServiceAccount needs "+
		"`create` on `tokenreviews` in group authentication.k8s.io, e.g. through a ClusterRoleBinding "+
		"to the ClusterRole system:auth-delegator.")
}

// Annotate describes the inputs.
func (a *TokenReviewArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.TokenFile, "Path of the token file. Set this or tokenEnv.")
	an.Describe(&a.TokenEnv, "Name of an environment variable of the provider holding the token file's path "+
		"(e.g. AWS_WEB_IDENTITY_TOKEN_FILE). Set this or tokenFile.")
	an.Describe(&a.Audience, "Audience the token must be valid for.")
}

// Annotate describes the outputs.
func (s *TokenReviewState) Annotate(a infer.Annotator) {
	a.Describe(&s.Path, "Path the token was read from.")
	a.Describe(&s.Username, "User the token authenticates, e.g. system:serviceaccount:NAMESPACE:NAME.")
	a.Describe(&s.Audiences, "Audiences the API server found the token valid for.")
}

// Check validates the inputs.
func (*TokenReview) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[TokenReviewArgs], error) {
	args, failures, err := infer.DefaultCheck[TokenReviewArgs](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[TokenReviewArgs]{Inputs: args, Failures: failures}, err
	}
	computed := func(key string) bool {
		v, ok := req.NewInputs.GetOk(key)
		return ok && v.IsComputed()
	}
	if !computed("tokenFile") && !computed("tokenEnv") && (args.TokenFile == "") == (args.TokenEnv == "") {
		failures = append(failures, p.CheckFailure{Property: "tokenFile", Reason: "set exactly one of tokenFile and tokenEnv"})
	}
	if known(req.NewInputs, "audience") && args.Audience == "" {
		failures = append(failures, p.CheckFailure{Property: "audience", Reason: "audience must not be empty"})
	}
	return infer.CheckResponse[TokenReviewArgs]{Inputs: args, Failures: failures}, nil
}

// Create reviews the token.
func (*TokenReview) Create(ctx context.Context, req infer.CreateRequest[TokenReviewArgs]) (infer.CreateResponse[TokenReviewState], error) {
	state := TokenReviewState{TokenFile: req.Inputs.TokenFile, TokenEnv: req.Inputs.TokenEnv, Audience: req.Inputs.Audience}
	if req.DryRun {
		return infer.CreateResponse[TokenReviewState]{ID: req.Name, Output: state}, nil
	}
	path, token, err := readToken(req.Inputs)
	if err != nil {
		return infer.CreateResponse[TokenReviewState]{}, err
	}
	state.Path = path
	api, err := newKubeAPI()
	if err != nil {
		return infer.CreateResponse[TokenReviewState]{}, err
	}
	body := map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
		"spec": map[string]any{"token": token, "audiences": []string{req.Inputs.Audience}},
	}
	var review struct {
		Status struct {
			Authenticated bool     `json:"authenticated"`
			Audiences     []string `json:"audiences"`
			Error         string   `json:"error"`
			User          struct {
				Username string `json:"username"`
			} `json:"user"`
		} `json:"status"`
	}
	if err := api.do(ctx, http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", body, &review); err != nil {
		return infer.CreateResponse[TokenReviewState]{}, fmt.Errorf("failed to review token %s: %w", path, err)
	}
	st := review.Status
	if !st.Authenticated {
		return infer.CreateResponse[TokenReviewState]{}, fmt.Errorf("token %s is not authenticated for audience %q: %s", path, req.Inputs.Audience, cmp.Or(st.Error, "no reason given"))
	}
	if !slices.Contains(st.Audiences, req.Inputs.Audience) {
		return infer.CreateResponse[TokenReviewState]{}, fmt.Errorf("token %s of %s is valid for audiences %q, not for %q", path, st.User.Username, st.Audiences, req.Inputs.Audience)
	}
	state.Username, state.Audiences = st.User.Username, st.Audiences
	return infer.CreateResponse[TokenReviewState]{ID: req.Name, Output: state}, nil
}

// readToken returns the token file's path and content.
func readToken(args TokenReviewArgs) (string, string, error) {
	path := args.TokenFile
	if args.TokenEnv != "" {
		path = os.Getenv(args.TokenEnv)
		if path == "" {
			return "", "", fmt.Errorf("environment variable %s is not set: the program was not told where the token is", args.TokenEnv)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("failed to read token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", "", fmt.Errorf("token file %s is empty", path)
	}
	return path, token, nil
}
