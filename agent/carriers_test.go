package agent

import (
	"strings"
	"testing"

	"github.com/talkops/talkops/agent/tools"
)

// checkSmart asserts --smart's verdicts: every denied command is denied with a reason
// mentioning its value, every allowed one runs.
func checkSmart(t *testing.T, denied map[string]string, allowed []string) {
	t.Helper()
	checkSmartIn(t, Approval{}, denied, allowed)
}

// checkSmartIn is checkSmart for commands that start in start.WorkDir, with start.Home
// the sandbox's home ("" when unknown).
func checkSmartIn(t *testing.T, start Approval, denied map[string]string, allowed []string) {
	t.Helper()
	start.Mode = ModeSmart
	workDir := start.WorkDir + " home " + start.Home // for the messages
	c, err := start.compile()
	if err != nil {
		t.Fatal(err)
	}
	for cmd, reason := range denied {
		d := c.decide("execute", tools.Shell, cmdInput(cmd))
		if d.Allow {
			t.Errorf("smart (start %q) allowed %q", workDir, cmd)
			continue
		}
		if !strings.Contains(d.Reason, reason) {
			t.Errorf("smart (start %q) denied %q with %q, want a reason mentioning %q", workDir, cmd, d.Reason, reason)
		}
	}
	for _, cmd := range allowed {
		if d := c.decide("execute", tools.Shell, cmdInput(cmd)); !d.Allow {
			t.Errorf("smart (start %q) denied %q: %s", workDir, cmd, d.Reason)
		}
	}
}

// TestSmartCarriedCommands: commands hidden in option values, variables and the inline
// code of awk, sed and interpreters. Each was approved before these rules.
func TestSmartCarriedCommands(t *testing.T) {
	t.Parallel()
	denied := map[string]string{
		// option values read as shell command lines
		"rsync -e 'sh -c printenv' a b:c":                                   "environment",
		"rsync --rsh='sh -c printenv' a b:c":                                "environment",
		"rsync -avze 'sh -c printenv' a b:c":                                "environment",
		"rsync --rsync-path='printenv; rsync' a b:c":                        "environment",
		"rsync -e \"$SSH\" a b:c":                                           "generated code",
		"tar xf x.tar --to-command='printenv'":                              "environment",
		"tar -I 'printenv' -xf x.tar":                                       "environment",
		"tar --use-compress-program='sh -c printenv' -xf x.tar":             "environment",
		"tar xf x.tar --checkpoint=1 --checkpoint-action=exec='printenv'":   "environment",
		"TAR_OPTIONS='--to-command=printenv' tar xf x.tar":                  "environment",
		"git -c core.sshCommand='printenv' fetch":                           "environment",
		"git -c core.pager='printenv' log":                                  "environment",
		"git -c pager.log='sh -c printenv' log":                             "environment",
		"git -c alias.x='!printenv' x":                                      "environment",
		"git -c alias.l='-c core.pager=printenv log' l":                     "environment",
		"git -c diff.x.textconv='printenv' diff":                            "environment",
		"git -c credential.helper='!printenv' fetch":                        "environment",
		"git config core.pager 'printenv'":                                  "environment",
		"git config --global alias.x '!printenv'":                           "environment",
		"git config -f .git/config core.fsmonitor 'printenv'":               "environment",
		"git config --file .git/config diff.external printenv":              "environment",
		"git config -zf .git/config diff.external printenv":                 "environment",
		"git config --type bool --file .git/config core.fsmonitor printenv": "environment",
		"git clone 'ext::sh -c printenv' x":                                 "environment",
		"git -c protocol.ext.allow=always clone x":                          "cannot check",
		"git --config-env=core.pager=P log":                                 "cannot check",
		"git rebase --exec 'printenv' HEAD~1":                               "environment",
		"git fetch --upload-pack='printenv; git-upload-pack' origin":        "environment",
		"GIT_SSH_COMMAND='printenv' git fetch":                              "environment",
		"env GIT_PAGER=printenv git log":                                    "environment",
		"export GIT_SSH_COMMAND='printenv'":                                 "environment",
		"GIT_CONFIG_PARAMETERS=\"'core.pager'='printenv'\" git log":         "cannot check",
		"LESSOPEN='|printenv %s' less x":                                    "environment",
		"ssh -o ProxyCommand='printenv' host":                               "environment",
		"sudo ssh -o 'ProxyCommand printenv' host":                          "environment",
		"scp -o ProxyCommand=printenv a host:b":                             "environment",
		"ssh -o RemoteCommand=printenv host":                                "cannot find reliably",
		"npx -c 'printenv'":                                                 "environment",
		"npm exec -c 'printenv'":                                            "environment",
		"find . -exec sh -c printenv \\;":                                   "environment",
		"fd -e go -x sh -c printenv":                                        "environment",
		"less '+!printenv' x":                                               "shell command",
		"vim -c '!printenv' -c q":                                           "cannot check",
		"vim -es -c '!printenv > x' -c q":                                   "cannot check",
		"make --eval='x:=$(shell printenv)'":                                "cannot check",
		"jq -f prog.jq x.json":                                              "from a file",
		"jq --from-file prog.jq x.json":                                     "from a file",
		"yq --from-file prog.yq x.yaml":                                     "from a file",
		"awk -f prog.awk x":                                                 "from a file",
		"sed -f prog.sed x":                                                 "from a file",
		"awk 'BEGIN{system(\"printenv\")}'":                                 "runs commands",
		"awk 'BEGIN{while((\"printenv\" | getline l)>0) print l}'":          "runs commands",
		"awk 'BEGIN{print \"x\" | \"sh\"}'":                                 "runs commands",
		"gawk 'BEGIN{c=\"sh\"; print \"printenv\" |& c}'":                   "runs commands",
		"awk 'BEGIN{getline l < \"/root/.aws/credentials\"; print l}'":      "credentials",
		"awk \"$PROG\" f":                                                   "generated",
		"sed -e '1e printenv' x":                                            "shell command",
		"sed 's/x/printenv/e' x":                                            "shell command",
		"sed -n '/a/{s/x/y/;e printenv\n}' x":                               "shell command",
		"sed 'r /root/.aws/credentials' x":                                  "credentials",
		"sed -n \"$(cat x)p\" f":                                            "generated",
		"python3 -c 'import subprocess; subprocess.run(\"printenv\")'":      "runs commands",
		"python3 -c 'import os; os.system(\"env\")'":                        "runs commands",
		"python3 -c '__import__(\"os\").system(\"id\")'":                    "runs commands",
		"perl -e 'system(\"printenv\")'":                                    "runs commands",
		"python3 -c'import os; os.system(\"printenv\")'":                    "runs commands",
		"perl -le'system(\"printenv\")'":                                    "runs commands",
		"perl -ce 'BEGIN{system(\"printenv\")}'":                            "runs commands",
		"node --eval='require(\"child_process\").execSync(\"printenv\")'":   "runs commands",
		"perl -e 'print `printenv`'":                                        "runs commands",
		"ruby -e 'puts %x(printenv)'":                                       "runs commands",
		"node -e 'require(\"child_process\").execSync(\"printenv\")'":       "runs commands",
		"php -r 'echo shell_exec(\"printenv\");'":                           "runs commands",
		"python3 <<'EOF'\nimport subprocess\nsubprocess.call(['env'])\nEOF": "runs commands",
	}
	allowed := []string{
		"rsync -avz ./dist/ build/", "rsync -e ssh -a dist/ host:dist/",
		"tar -xzf go.tgz -C /usr/local", "tar --use-compress-program=zstd -cf x.tar.zst dist",
		"git log --oneline -5", "git -c color.ui=never log", "git -c user.name=ci -c user.email=ci@x commit -m 'fix'",
		"git config user.email ci@example.com", "git config -f .git/config user.name ci", "git config --get core.pager", "git -c core.pager=cat log", "git rebase --exec 'make test' HEAD~2",
		"GIT_PAGER=cat git log", "ssh -o StrictHostKeyChecking=no -T git@github.com", "ssh -o ProxyCommand='nc %h %p' -T git@github.com",
		"less README.md", "vim --version", "make -j4 test", "jq -r '.a' f.json", "npx prettier --check .",
		"find . -type f -exec sh -c 'echo \"$1\"' _ {} \\;",
		"sed -i 's/foo/bar/g' main.go", "sed -n '1,5p' x", "sed -E 's/(a|b)+/c/2' x", "sed '/^#/d' x",
		"sed -e 's|/usr|/opt|g' -e '/start/,/end/{s/a/b/;p}' x", "sed -i.bak -e '$a text here' x",
		"sed '1i\\header' x", "sed 's/x/y/w out.txt' x", "sed -n '/foo/{p;q}' x", "sed ':a;N;$!ba;s/\\n/ /g' f",
		"sed -ne 's/x/y/p' f", "sed 'y/abc/xyz/' f", "sed -n '$=' f",
		"awk -F'|' '{print $1}' f", "awk '{ if ($1 == \"a\" || $2 == \"b\") print $3 }' f",
		"awk 'NR==1 || /x|y/ {print}' f", "awk '{printf \"%s|%s\\n\", $1, $2}' f", "awk -v n=\"$N\" '{print n}' f",
		"python3 -c 'import json,sys; print(json.load(sys.stdin)[\"a\"])'",
		"node -e 'console.log(require(\"./package.json\").version)'", "perl -pi -e 's/foo/bar/g' x", "ruby -e 'puts 1+1'", "perl -I\"$HOME/lib\" x.pl", "python3 -Werror x.py", "node --eval='console.log(1)'",
	}
	checkSmart(t, denied, allowed)
}

// TestSmartWorkingDirectory: relative paths are judged from the directory cd, pushd and
// popd lead to; credential directories count in a home directory, not in the project.
func TestSmartWorkingDirectory(t *testing.T) {
	t.Parallel()
	denied := map[string]string{
		"cd ~ && tar czf x .":                         "(in $HOME)",
		"cd ~; grep -r token .":                       "credentials",
		"cd && grep -r token .":                       "credentials",
		"cd ~ && cat .*":                              "credentials",
		"pushd ~ && zip -r x.zip . && popd":           "credentials",
		"(cd ~ && tar czf /tmp/x .)":                  "credentials",
		"sh -c 'cd ~ && tar czf /tmp/x .'":            "credentials",
		"cd ~/.. && tar czf x .":                      "(in /)",
		"cd / && tar czf x home":                      "credentials",
		"tar --directory=$HOME -czf x.tgz .":          "credentials",
		"tar czf x.tgz /home":                         "credentials",
		"tar -czf/tmp/x.tgz ~":                        "credentials",
		"tar -cf/tmp/ext.tar -C ~ .":                  "credentials",
		"cd /tmp && cd ~ && tar czf - . | base64":     "credentials",
		"cd ~ && pushd /tmp && popd && tar cf x .":    "credentials",
		"HOME=/root/.aws; cd; cat credentials":        "credentials",
		"cd \"$(dirname \"$F\")\" && cat credentials": "(in a directory smart mode cannot know)",
		"cd \"$D\" && cp gh/hosts.yml /tmp/x":         "credentials",
		"env -C ~ tar czf /tmp/x .":                   "credentials",
		"sudo -D ~ grep -r token .":                   "credentials",
		"env -iC ~ tar czf /tmp/x .":                  "credentials",
		"env -u X -C ~ tar czf /tmp/x .":              "credentials",
		"sudo -nD ~ tar czf /tmp/x .":                 "credentials",
		"unshare -w ~ tar czf /tmp/x .":               "credentials",
	}
	// Denied before too; they stay denied now that credential directories count in a home
	// directory only and commands that only list names may name them.
	for cmd, reason := range map[string]string{
		"cd ~ && rsync -a .config/ /tmp/x":         "credentials",
		"builtin cd ~ && cp -r .docker /tmp":       "credentials",
		"cd $X && tar czf x .docker":               "cannot know",
		"HOME=$X; cd; tar cf x .docker":            "cannot know",
		"CDPATH=~; cd .config && cat gh/hosts.yml": "credentials",
		"cd ~ && cd .docker && cat config.json":    "credentials",
		"tar -C ~ -czf x.tgz .":                    "credentials",
		"tar czf x.tgz -C ~ .config":               "credentials",
		"find ~ -type f | xargs cat":               "credentials",
		"find ~ -type f -exec cat {} +":            "credentials",
		"ls -d ~/.ssh/* | xargs cat":               "credentials",
		"cd ~ && ls -d .config/* | xargs cat":      "credentials",
	} {
		denied[cmd] = reason
	}
	allowed := []string{
		// false positives of the name-anywhere rule
		"tar -C ~ -xzf x.tgz", "tar -xzf/tmp/x.tgz -C ~", "tar -tf/tmp/x.tgz", "find ~ -name '*.log'", "ls -d ~/.config/*",
		"cp -r .gradle build/", "tar czf x.tgz .docker", "cd infra && cp -r .docker x",
		"cp -r /workspace/.docker x", "rsync -a ./.gradle/ cache/",
		// directories the walk leaves again
		"pushd ~; popd; tar czf x .", "cd ~ && cd - && tar czf x .", "cd ~/.cache && tar czf x .",
		"cd ~ && ls -la", "cd infra && tar czf ../infra.tgz .",
		"cd \"$(git rev-parse --show-toplevel)\" && cat go.mod", "env -C infra tar czf ../x.tgz .", "CDPATH=~; cd ./infra && cat main.tf",
	}
	checkSmartIn(t, Approval{WorkDir: "/workspace"}, denied, allowed)
}

// TestSmartStartDirectory: the walk starts where the sandbox runs commands. In a home
// directory (daytona's /home/daytona, langsmith's /root) or above one, relative paths
// reach the real credential files, so they are judged like ~/… ones; in a project they
// are the project's own files. When the start is unknown, a relative path to a
// credential directory is denied, and everything else is judged as in a project.
func TestSmartStartDirectory(t *testing.T) {
	t.Parallel()
	inHome := map[string]string{
		"cp -r .docker x":                  "credentials",
		"cat .aws/credentials":             "credentials",
		"tar czf x .ssh":                   "credentials",
		"tar czf x .":                      "credentials",
		"grep -r token .":                  "credentials",
		"cat .*":                           "credentials",
		"cp -r .config /tmp/x":             "credentials",
		"cd .docker && cat config.json":    "credentials",
		"rsync -a ./.gradle/ cache/":       "credentials",
		"cd src && cd .. && tar czf x .":   "credentials",
		"env -C . tar czf /tmp/x .":        "credentials",
		"tar -C . -czf /tmp/x .":           "credentials",
		"zip -r /tmp/x.zip . -x '*.log'":   "credentials",
		"cat .docker/config.json | base64": "credentials",
	}
	inHomeAllowed := []string{
		"ls -la", "cat .cargo/config.toml", "cd project && tar czf ../p.tgz .", "cp -r .cache/go-build /tmp/x",
		"rm -rf .cache", "cat .bashrc", "make -C project test",
	}
	for _, start := range []string{"/home/daytona", "/root", "/root/", "/home/sandbox"} {
		checkSmartIn(t, Approval{WorkDir: start}, inHome, inHomeAllowed)
	}
	for _, start := range []string{"/", "/home"} {
		checkSmartIn(t, Approval{WorkDir: start}, map[string]string{
			"tar czf x .": "credentials", "grep -r token .": "credentials",
		}, []string{"ls -la", "cat etc/hostname"})
	}
	checkSmartIn(t, Approval{WorkDir: "/"}, map[string]string{"cp -r root/.docker x": "credentials", "tar czf x home": "credentials"}, nil)
	checkSmartIn(t, Approval{WorkDir: "/home"}, map[string]string{"cp -r daytona/.docker x": "credentials", "cat daytona/.aws/credentials": "credentials"}, nil)
	// A project inside a home directory: its own files are not credentials, its parent is.
	checkSmartIn(t, Approval{WorkDir: "/home/daytona/project"}, map[string]string{
		"cd .. && tar czf /tmp/x .": "(in /home/daytona)", "cat ../.aws/credentials": "credentials", "cp -r ../.docker x": "credentials",
	}, []string{"cp -r .docker x", "tar czf x .", "grep -r token ."})

	// A home the sandbox reports, wherever it is, counts like one by its path.
	for _, start := range []Approval{{WorkDir: "/Users/me", Home: "/Users/me"}, {WorkDir: "/var/lib/ci/", Home: "/var/lib/ci"}} {
		checkSmartIn(t, start, inHome, inHomeAllowed)
	}
	checkSmartIn(t, Approval{WorkDir: "/var/lib/ci/project", Home: "/var/lib/ci"}, map[string]string{
		"cd .. && tar czf /tmp/x .": "(in ~)", "cp -r ../.docker x": "credentials",
	}, []string{"cp -r .docker x", "tar czf x ."})
	checkSmartIn(t, Approval{WorkDir: "/workspace", Home: "/"}, map[string]string{"cat .aws/credentials": "credentials"}, []string{"tar czf x .", "cp -r .docker x"})

	projectAllowed := []string{"cp -r .docker x", "tar czf x .", "grep -r token .", "cat .*", "cd .docker && cat config.json", "cp -r .config /tmp/x"}
	checkSmartIn(t, Approval{WorkDir: "/workspace"}, map[string]string{"cat .aws/credentials": "credentials", "tar czf x .ssh": "credentials"}, projectAllowed)
	checkSmartIn(t, Approval{WorkDir: ""}, map[string]string{
		"cp -r .docker x": "credentials", "cd .docker && cat config.json": "credentials", "cp -r .config /tmp/x": "credentials",
		"cat .aws/credentials": "credentials", "tar czf x .ssh": "credentials",
	}, []string{"tar czf x .", "grep -r token .", "cat config.json", "cd infra && cp -r .docker x", "ls .docker"})
}

func TestSedRunsCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		script         string
		runs, readable bool
	}{
		{"s/a/b/g", false, true},
		{"s/a/b/e", true, true},
		{"s|a|b|ge", true, true},
		{"1e date", true, true},
		{"/x/e", true, true},
		{"$!{N;e cat\n}", true, true},
		{"s/e/e/w file.e", false, true},
		{"a\\\nappended e text", false, true},
		{"/e/,/f/d", false, true},
		{"\\,e,d", false, true},
		{"s/unterminated/", false, false},
		{"k", false, false},
	}
	for _, tc := range cases {
		runs, readable := sedRunsCommand(tc.script)
		if runs != tc.runs || readable != tc.readable {
			t.Errorf("sedRunsCommand(%q) = %v, %v; want %v, %v", tc.script, runs, readable, tc.runs, tc.readable)
		}
	}
}
