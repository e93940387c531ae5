package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/stackwright/stackwright/internal/testing/repo"
)

// maxRounds bounds the fixed point: a raised module can require newer versions of others,
// which the next round aligns. Real dependency graphs settle in two or three rounds.
const maxRounds = 8

func main() {
	if err := align(); err != nil {
		fmt.Fprintln(os.Stderr, "align-modules:", err)
		os.Exit(1)
	}
}

func align() error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	for round := 1; round <= maxRounds; round++ {
		reqs := make(map[string]map[string]string, len(repo.AlignedModules))
		pinned := make(map[string]map[string]bool, len(repo.AlignedModules))
		newest := map[string]string{}
		for _, dir := range repo.AlignedModules {
			r, p, err := repo.Requirements(root, dir)
			if err != nil {
				return err
			}
			reqs[dir], pinned[dir] = r, p
			for path, v := range r {
				if semver.Compare(v, newest[path]) > 0 {
					newest[path] = v
				}
			}
		}
		changed := false
		for _, dir := range repo.AlignedModules {
			var raise []string
			for path, v := range reqs[dir] {
				if want := newest[path]; v != want {
					raise = append(raise, "-require="+path+"@"+want)
					if pinned[dir][path] {
						raise = append(raise, "-replace="+path+"="+path+"@"+want)
					}
				}
			}
			if len(raise) == 0 {
				continue
			}
			sort.Strings(raise)
			changed = true
			fmt.Printf("%s: raising %s\n", dir, strings.Join(raise, " "))
			dir = filepath.Join(root, dir)
			if err := goCmd(dir, append([]string{"mod", "edit"}, raise...)...); err != nil {
				return err
			}
			if err := goCmd(dir, "mod", "tidy"); err != nil {
				return err
			}
		}
		if !changed {
			fmt.Printf("aligned after %d round(s)\n", round)
			return nil
		}
	}
	return fmt.Errorf("the modules did not agree after %d rounds", maxRounds)
}

func goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("failed to run go %s in %s: %w: %s", args[0], dir, err, stderr.Bytes())
	}
	return nil
}
