package modalfake_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/talkops/talkops/providers/modal/internal/modalpb"
	"github.com/talkops/talkops/providers/modal/modalfake"
)

// TestSandboxNames checks the fake's model of sandbox names against Modal's: unique
// within an app among running sandboxes (ALREADY_EXISTS on a duplicate, free again once
// the sandbox is terminated), found by SandboxGetFromName (NOT_FOUND otherwise), and
// tags sent with the create.
func TestSandboxNames(t *testing.T) {
	srv := modalfake.New("ak", "as")
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(srv.URL[len("https://"):], grpc.WithTransportCredentials(credentials.NewTLS(srv.TLSConfig())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	api := pb.NewModalClientClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-modal-client-type", "test", "x-modal-client-version", "1",
		"x-modal-token-id", "ak", "x-modal-token-secret", "as")
	tok, err := api.AuthTokenGet(ctx, &pb.AuthTokenGetRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "x-modal-auth-token", tok.GetToken())
	app, err := api.AppGetOrCreate(ctx, &pb.AppGetOrCreateRequest{AppName: "talkops", EnvironmentName: "ci",
		ObjectCreationType: pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING})
	if err != nil {
		t.Fatal(err)
	}
	create := func(ctx context.Context, name string) (*pb.SandboxCreateResponse, error) {
		return api.SandboxCreate(ctx, &pb.SandboxCreateRequest{AppId: app.GetAppId(),
			Definition: &pb.Sandbox{ImageId: "im-test", Workdir: proto.String(t.TempDir()), Name: proto.String(name)},
			Tags:       []*pb.SandboxTag{{TagName: "talkops.run-id", TagValue: "r1"}}})
	}
	lookup := func(name, appName string) (string, codes.Code) {
		resp, err := api.SandboxGetFromName(ctx, &pb.SandboxGetFromNameRequest{SandboxName: name, AppName: appName, EnvironmentName: "ci"})
		return resp.GetSandboxId(), status.Code(err)
	}

	first, err := create(ctx, "talkops-r1-abc")
	if err != nil {
		t.Fatal(err)
	}
	if sb, _ := srv.Sandbox(first.GetSandboxId()); sb.Tags["talkops.run-id"] != "r1" {
		t.Errorf("tags = %v; want the ones sent with the create", sb.Tags)
	}
	// Each call carries its own idempotency key (none here), as a new create does.
	if _, err := create(ctx, "talkops-r1-abc"); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a second sandbox with the same name: %v; want ALREADY_EXISTS", err)
	}
	if id, code := lookup("talkops-r1-abc", "talkops"); code != codes.OK || id != first.GetSandboxId() {
		t.Errorf("SandboxGetFromName = %q, %v; want %s", id, code, first.GetSandboxId())
	}
	for _, tc := range []struct{ name, app string }{{"talkops-r1-other", "talkops"}, {"talkops-r1-abc", "another-app"}} {
		if _, code := lookup(tc.name, tc.app); code != codes.NotFound {
			t.Errorf("SandboxGetFromName(%s in %s) = %v; want NOT_FOUND", tc.name, tc.app, code)
		}
	}
	if _, err := api.SandboxTerminate(ctx, &pb.SandboxTerminateRequest{SandboxId: first.GetSandboxId()}); err != nil {
		t.Fatal(err)
	}
	if _, code := lookup("talkops-r1-abc", "talkops"); code != codes.NotFound {
		t.Errorf("SandboxGetFromName of a terminated sandbox = %v; want NOT_FOUND", code)
	}
	if _, err := create(ctx, "talkops-r1-abc"); err != nil {
		t.Errorf("the name of a terminated sandbox is free again, but: %v", err)
	}
}
