package engine

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
)

// sealed is a state secret: text encrypted with c, or as is (an inner secret) when c is nil.
func sealed(t *testing.T, c config.Encrypter, text string) map[string]any {
	t.Helper()
	if c != nil {
		var err error
		if text, err = c.EncryptValue(context.Background(), text); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]any{secretSigKey: secretSigValue, "ciphertext": text}
}

func TestReveal_StateValues_Plain(t *testing.T) {
	key := []byte(strings.Repeat("k", config.SymmetricCrypterKeyBytes))
	c := config.NewSymmetricCrypter(key)
	inner, _ := sealed(t, nil, `"deep"`)["ciphertext"].(string)
	tests := []struct {
		name    string
		in      any
		want    any
		wantErr bool
	}{
		{"plain value", map[string]any{"a": []any{1.0, "x"}}, map[string]any{"a": []any{1.0, "x"}}, false},
		{"secret string", sealed(t, c, `"s3cret"`), "s3cret", false},
		{"secret object", sealed(t, c, `{"n":3}`), map[string]any{"n": 3.0}, false},
		{"secret inside a plain object", map[string]any{"pw": sealed(t, c, `"x"`)}, map[string]any{"pw": "x"}, false},
		{"secret inside a secret", sealed(t, c, `{"in":{"`+secretSigKey+`":"`+secretSigValue+`","ciphertext":`+jsonString(inner)+`}}`),
			map[string]any{"in": "deep"}, false},
		{"shown secret", map[string]any{secretSigKey: secretSigValue, "plaintext": `"p"`}, "p", false},
		{"ciphertext of another key", sealed(t, config.NewSymmetricCrypter([]byte(strings.Repeat("o", 32))), `"x"`), nil, true},
		{"secret without ciphertext", map[string]any{secretSigKey: secretSigValue}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reveal(context.Background(), tt.in, c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("reveal error = %v; want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); !tt.wantErr && diff != "" {
				t.Errorf("reveal (-want +got):\n%s", diff)
			}
		})
	}
}

func jsonString(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

func TestPassphraseDecrypter_Salt_ChecksPassphrase(t *testing.T) {
	ctx := context.Background()
	salt := []byte("01234567")
	check, err := config.NewSymmetricCrypterFromPassphrase("right", salt).EncryptValue(ctx, "pulumi")
	if err != nil {
		t.Fatal(err)
	}
	state := "v1:" + base64.StdEncoding.EncodeToString(salt) + ":" + check
	if _, err := passphraseDecrypter(ctx, "right", state); err != nil {
		t.Errorf("right passphrase: %v", err)
	}
	if _, err := passphraseDecrypter(ctx, "wrong", state); err == nil {
		t.Error("wrong passphrase accepted")
	}
	if _, err := passphraseDecrypter(ctx, "right", "v2:abc"); err == nil {
		t.Error("unknown salt format accepted")
	}
}

func TestRun_StatePath_Backends(t *testing.T) {
	tests := []struct {
		name, backend, stack string
		want                 string
	}{
		{"file backend", "file:///var/state", "dev", "/var/state/.pulumi/stacks/proj/dev.json"},
		{"query ignored", "file:///var/state?no_tmp_dir=true", "dev", "/var/state/.pulumi/stacks/proj/dev.json"},
		{"qualified name", "file:///s", "organization/proj/dev", "/s/.pulumi/stacks/proj/dev.json"},
		{"other project", "file:///s", "organization/other/dev", ""},
		{"home-relative", "file://~/state", "dev", ""},
		{"cloud", "https://api.pulumi.com", "dev", ""},
		{"s3", "s3://bucket", "dev", ""},
		{"none", "", "dev", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &run{req: Request{Stack: tt.stack}, env: map[string]string{"PULUMI_BACKEND_URL": tt.backend}, project: "proj"}
			got, ok := x.statePath()
			if ok != (tt.want != "") || got != tt.want {
				t.Errorf("statePath() = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}
