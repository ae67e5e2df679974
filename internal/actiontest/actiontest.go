// Package actiontest reads the GitHub Action's metadata (action.yml) and its input table
// (.github/action/inputs.json) for the tests that check them against the real talkops
// command line. The action itself is run by a real Actions runner (nektos/act) in this
// package's tests, not simulated.
package actiontest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v4"
)

// Action is the part of action.yml the runner reads.
type Action struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Author      string            `yaml:"author"`
	Inputs      map[string]Input  `yaml:"inputs"`
	Outputs     map[string]Output `yaml:"outputs"`
	Runs        Runs              `yaml:"runs"`
	Branding    struct {
		Icon  string `yaml:"icon"`
		Color string `yaml:"color"`
	} `yaml:"branding"`
}

// Input is one entry of inputs:.
type Input struct {
	Description string  `yaml:"description"`
	Required    bool    `yaml:"required"`
	Default     *string `yaml:"default"`
}

// Output is one entry of outputs:.
type Output struct {
	Description string `yaml:"description"`
	Value       string `yaml:"value"`
}

// Runs is runs: of a JavaScript action.
type Runs struct {
	Using  string `yaml:"using"`
	Main   string `yaml:"main"`
	Pre    string `yaml:"pre"`
	Post   string `yaml:"post"`
	PostIf string `yaml:"post-if"`
}

// Load reads action.yml from dir.
func Load(dir string) (*Action, error) {
	data, err := os.ReadFile(filepath.Join(dir, "action.yml"))
	if err != nil {
		return nil, err
	}
	var a Action
	if err := yaml.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("action.yml: %w", err)
	}
	return &a, nil
}

// Command is how main.js turns inputs into one talkops command's arguments and
// environment (see the comment in inputs.json).
type Command struct {
	Flags    map[string]string `json:"flags"`    // input -> --flag, passed when not empty
	Pinned   map[string]string `json:"pinned"`   // input -> value used when it is empty; always passed
	Switches map[string]string `json:"switches"` // input -> --flag, passed when "true"
	Env      map[string]string `json:"env"`      // input -> variable, set when not empty
}

// Inputs is .github/action/inputs.json: the command ("run", "report") -> its mapping.
type Inputs struct {
	Run    Command `json:"run"`
	Report Command `json:"report"`
}

// LoadInputs reads .github/action/inputs.json from the action's directory.
func LoadInputs(dir string) (*Inputs, error) {
	data, err := os.ReadFile(filepath.Join(dir, ".github", "action", "inputs.json"))
	if err != nil {
		return nil, err
	}
	var in Inputs
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf(".github/action/inputs.json: %w", err)
	}
	return &in, nil
}

// Commands maps the talkops command name to its mapping.
func (in *Inputs) Commands() map[string]Command {
	return map[string]Command{"run": in.Run, "report": in.Report}
}
