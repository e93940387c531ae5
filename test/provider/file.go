package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// File manages a file below the root directory.
type File struct{}

// FileArgs are the inputs of a File.
type FileArgs struct {
	Path    string `pulumi:"path" provider:"replaceOnChanges"`
	Content string `pulumi:"content"`
}

// FileState is the checkpointed state of a File.
type FileState struct {
	Path    string `pulumi:"path"`
	Content string `pulumi:"content"`
	Sha256  string `pulumi:"sha256"`
}

var (
	_ infer.CustomCheck[FileArgs]                     = (*File)(nil)
	_ infer.CustomDiff[FileArgs, FileState]           = (*File)(nil)
	_ infer.CustomUpdate[FileArgs, FileState]         = (*File)(nil)
	_ infer.CustomRead[FileArgs, FileState]           = (*File)(nil)
	_ infer.CustomDelete[FileState]                   = (*File)(nil)
	_ infer.ExplicitDependencies[FileArgs, FileState] = (*File)(nil)
)

// Annotate describes the resource.
func (f *File) Annotate(a infer.Annotator) {
	a.SetToken("index", "File")
	a.Describe(&f, "A file below $"+RootEnvVar+". Read reports the file as it is on disk.")
}

// Annotate describes the inputs.
func (a *FileArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Path, "Path of the file relative to $"+RootEnvVar+". Changing it replaces the file.")
	an.Describe(&a.Content, "Content of the file. May be a secret.")
}

// Annotate describes the outputs.
func (s *FileState) Annotate(a infer.Annotator) {
	a.Describe(&s.Path, "Path of the file relative to $"+RootEnvVar+".")
	a.Describe(&s.Content, "Content of the file; secret if the input was.")
	a.Describe(&s.Sha256, "Hex SHA-256 of the content; secret if the content is.")
}

// WireDependencies makes sha256 carry the secretness of content.
func (*File) WireDependencies(f infer.FieldSelector, args *FileArgs, state *FileState) {
	f.OutputField(&state.Path).DependsOn(f.InputField(&args.Path))
	f.OutputField(&state.Content).DependsOn(f.InputField(&args.Content))
	f.OutputField(&state.Sha256).DependsOn(f.InputField(&args.Content))
}

// Check validates the inputs.
func (*File) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[FileArgs], error) {
	args, failures, err := infer.DefaultCheck[FileArgs](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[FileArgs]{Inputs: args, Failures: failures}, err
	}
	return infer.CheckResponse[FileArgs]{
		Inputs:   args,
		Failures: checkRelPath(req.NewInputs, "path", args.Path),
	}, nil
}

// Diff compares the new inputs with the state (which Read keeps in line with
// the disk). A path change replaces the file, deleting the old one first: two
// spellings of one path (e.g. "a" and "./a") would otherwise have the delete of
// the old resource remove the file just written by its replacement.
func (*File) Diff(ctx context.Context, req infer.DiffRequest[FileArgs, FileState]) (infer.DiffResponse, error) {
	diff := map[string]p.PropertyDiff{}
	if req.Inputs.Path != req.State.Path {
		diff["path"] = p.PropertyDiff{Kind: p.UpdateReplace}
	}
	if req.Inputs.Content != req.State.Content {
		diff["content"] = p.PropertyDiff{Kind: p.Update}
	}
	return infer.DiffResponse{
		DeleteBeforeReplace: true,
		HasChanges:          len(diff) > 0,
		DetailedDiff:        diff,
	}, nil
}

// Create writes the file.
func (*File) Create(ctx context.Context, req infer.CreateRequest[FileArgs]) (infer.CreateResponse[FileState], error) {
	id, err := cleanRelPath(req.Inputs.Path)
	if err != nil {
		return infer.CreateResponse[FileState]{}, err
	}
	state := newFileState(req.Inputs.Path, req.Inputs.Content)
	if req.DryRun {
		return infer.CreateResponse[FileState]{ID: id, Output: state}, nil
	}
	if err := writeFile(req.Inputs.Path, req.Inputs.Content); err != nil {
		return infer.CreateResponse[FileState]{}, err
	}
	return infer.CreateResponse[FileState]{ID: id, Output: state}, nil
}

// Update rewrites the file. Path changes are replacements, so only content changes here.
func (*File) Update(
	ctx context.Context, req infer.UpdateRequest[FileArgs, FileState],
) (infer.UpdateResponse[FileState], error) {
	state := newFileState(req.Inputs.Path, req.Inputs.Content)
	if req.DryRun {
		return infer.UpdateResponse[FileState]{Output: state}, nil
	}
	if err := writeFile(req.Inputs.Path, req.Inputs.Content); err != nil {
		return infer.UpdateResponse[FileState]{}, err
	}
	return infer.UpdateResponse[FileState]{Output: state}, nil
}

// Read reports the file as it is on disk. A missing file yields an empty ID,
// which tells the engine the resource is gone.
func (*File) Read(
	ctx context.Context, req infer.ReadRequest[FileArgs, FileState],
) (infer.ReadResponse[FileArgs, FileState], error) {
	path := req.State.Path
	if path == "" {
		path = req.ID // import: only the ID is known
	}
	full, err := resolveUnderRoot(path)
	if err != nil {
		return infer.ReadResponse[FileArgs, FileState]{}, err
	}
	data, err := os.ReadFile(full)
	if errors.Is(err, fs.ErrNotExist) {
		return infer.ReadResponse[FileArgs, FileState]{}, nil
	}
	if err != nil {
		return infer.ReadResponse[FileArgs, FileState]{}, fmt.Errorf("reading %s: %w", full, err)
	}
	content := string(data)
	return infer.ReadResponse[FileArgs, FileState]{
		ID:     req.ID,
		Inputs: FileArgs{Path: path, Content: content},
		State:  newFileState(path, content),
	}, nil
}

// Delete removes the file; a file that is already gone is fine.
func (*File) Delete(ctx context.Context, req infer.DeleteRequest[FileState]) (infer.DeleteResponse, error) {
	path := req.State.Path
	if path == "" {
		path = req.ID
	}
	full, err := resolveUnderRoot(path)
	if err != nil {
		return infer.DeleteResponse{}, err
	}
	err = os.Remove(full)
	if errors.Is(err, fs.ErrNotExist) {
		p.GetLogger(ctx).Warningf("file %q was already deleted", path)
		return infer.DeleteResponse{}, nil
	}
	return infer.DeleteResponse{}, err
}

func newFileState(path, content string) FileState {
	sum := sha256.Sum256([]byte(content))
	return FileState{Path: path, Content: content, Sha256: hex.EncodeToString(sum[:])}
}

func writeFile(path, content string) error {
	full, err := resolveUnderRoot(path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return fmt.Errorf("creating parent directories of %s: %w", full, err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", full, err)
	}
	return nil
}
