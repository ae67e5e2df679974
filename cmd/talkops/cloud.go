package main

import (
	"time"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/agentcore"
	"github.com/talkops/talkops/providers/daytona"
	"github.com/talkops/talkops/providers/langsmith"
	"github.com/talkops/talkops/providers/modal"
	"github.com/talkops/talkops/providers/runloop"
	"github.com/talkops/talkops/providers/vercel"
)

// The [sandboxes.providers.NAME] tables of the cloud providers. They are the user-facing
// subset of each provider's Options: transport knobs (HTTP client, retry policy,
// counters) are not configuration. working_dir, common to every provider, reaches the
// provider through Spec.WorkDir.

type daytonaTable struct {
	APIURL          string        `toml:"api_url"`
	Target          string        `toml:"target"`
	Image           string        `toml:"image"`
	CPU             int           `toml:"cpu"`
	MemoryGB        int           `toml:"memory_gb"`
	DiskGB          int           `toml:"disk_gb"`
	AutoStopMinutes int           `toml:"auto_stop_minutes"`
	ReadyTimeout    time.Duration `toml:"ready_timeout"`
}

type vercelTable struct {
	APIURL       string        `toml:"api_url"`
	Runtime      string        `toml:"runtime"`
	Image        string        `toml:"image"`
	VCPUs        int           `toml:"vcpus"`
	Region       string        `toml:"region"`
	Timeout      time.Duration `toml:"timeout"`
	ReadyTimeout time.Duration `toml:"ready_timeout"`
}

type runloopTable struct {
	APIURL       string        `toml:"api_url"`
	ResourceSize string        `toml:"resource_size"`
	Architecture string        `toml:"architecture"`
	KeepAlive    time.Duration `toml:"keep_alive"`
	ReadyTimeout time.Duration `toml:"ready_timeout"`
}

type langsmithTable struct {
	APIURL       string        `toml:"api_url"`
	VCPUs        int           `toml:"vcpus"`
	MemBytes     int64         `toml:"memory_bytes"`
	DiskBytes    int64         `toml:"disk_bytes"`
	CommandLimit time.Duration `toml:"command_limit"`
	ReadyTimeout time.Duration `toml:"ready_timeout"`
	BuildTimeout time.Duration `toml:"build_timeout"`
}

type modalTable struct {
	ServerURL    string        `toml:"server_url"`
	Environment  string        `toml:"environment"`
	AppName      string        `toml:"app_name"`
	Image        string        `toml:"image"`
	ReadyTimeout time.Duration `toml:"ready_timeout"`
}

// cloudCaps: every cloud provider attaches by id and creates from a snapshot; only
// LangSmith builds the seeds' default snapshot (talkops-aws-agent) from the image.
var cloudCaps = capabilities{attach: true, snapshot: true, ownFilesystem: true}

func newDaytona(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
	var t daytonaTable
	if err := decodeProviderTable(cfg, daytona.Name, &t); err != nil {
		return nil, capabilities{}, err
	}
	p, err := daytona.New(daytona.Options{APIURL: t.APIURL, Target: t.Target, Image: t.Image,
		CPU: t.CPU, MemoryGB: t.MemoryGB, DiskGB: t.DiskGB, AutoStopMinutes: t.AutoStopMinutes, ReadyTimeout: t.ReadyTimeout}, getenv)
	if err != nil {
		return nil, capabilities{}, err
	}
	return p, cloudCaps, nil
}

func newVercel(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
	var t vercelTable
	if err := decodeProviderTable(cfg, vercel.Name, &t); err != nil {
		return nil, capabilities{}, err
	}
	p, err := vercel.New(vercel.Options{APIURL: t.APIURL, Runtime: t.Runtime, Image: t.Image,
		VCPUs: t.VCPUs, Region: t.Region, Timeout: t.Timeout, ReadyTimeout: t.ReadyTimeout}, getenv)
	if err != nil {
		return nil, capabilities{}, err
	}
	return p, cloudCaps, nil
}

func newRunloop(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
	var t runloopTable
	if err := decodeProviderTable(cfg, runloop.Name, &t); err != nil {
		return nil, capabilities{}, err
	}
	p, err := runloop.New(runloop.Options{APIURL: t.APIURL, ResourceSize: t.ResourceSize,
		Architecture: t.Architecture, KeepAlive: t.KeepAlive, ReadyTimeout: t.ReadyTimeout}, getenv)
	if err != nil {
		return nil, capabilities{}, err
	}
	return p, cloudCaps, nil
}

func newLangSmith(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
	var t langsmithTable
	if err := decodeProviderTable(cfg, langsmith.Name, &t); err != nil {
		return nil, capabilities{}, err
	}
	p, err := langsmith.New(langsmith.Options{APIURL: t.APIURL, VCPUs: t.VCPUs,
		MemBytes: t.MemBytes, DiskBytes: t.DiskBytes, CommandLimit: t.CommandLimit, ReadyTimeout: t.ReadyTimeout,
		BuildTimeout: t.BuildTimeout, SnapshotImage: cfg.Sandbox.Image}, getenv)
	if err != nil {
		return nil, capabilities{}, err
	}
	caps := cloudCaps
	caps.defaultSnapshot = true
	return p, caps, nil
}

func newAgentCore(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
	var opts agentcore.Options // its toml tags are the table keys; transport hooks are toml:"-"
	if err := decodeProviderTable(cfg, agentcore.Name, &opts); err != nil {
		return nil, capabilities{}, err
	}
	opts.WorkingDir = workingDir(cfg, agentcore.Name)
	p, err := agentcore.New(opts, getenv)
	if err != nil {
		return nil, capabilities{}, err
	}
	return p, capabilities{attach: true, ownFilesystem: true}, nil
}

func newModal(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
	var t modalTable
	if err := decodeProviderTable(cfg, modal.Name, &t); err != nil {
		return nil, capabilities{}, err
	}
	p, err := modal.New(modal.Options{ServerURL: t.ServerURL, Environment: t.Environment, AppName: t.AppName,
		Image: t.Image, ReadyTimeout: t.ReadyTimeout, WorkingDir: workingDir(cfg, modal.Name)}, getenv)
	if err != nil {
		return nil, capabilities{}, err
	}
	return p, cloudCaps, nil
}
