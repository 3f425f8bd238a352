package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"

	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// externalServices builds the external services by type (the
// workflow.ExternalService.Type a workflow names). The engine looks each
// workflow's service up in this map; a workflow whose type is missing
// waits with an error on /trigger-status, it never fails.
//
//   - command: local processes, their records and output under jobsDir
//     (--jobs);
//   - oozie: the Oozie Web Services API, with the installation's default
//     Oozie URL and properties from d (nil: none; a workflow must then
//     name its Oozie URL), authenticated with SPNEGO (the credential
//     cache, or --keytab and --principal) when the Hadoop configuration (--hadoop-conf) says
//     hadoop.security.authentication=kerberos (--oozie-spn overrides the
//     service principal), else with Oozie's simple authentication.
func externalServices(cfg Config, d *defaults.Defaults, log *slog.Logger) (map[string]external.Service, error) {
	cmd, err := command.New(cfg.Jobs, command.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("jobs directory %s (--jobs; default: beside --db): %w", cfg.Jobs, err)
	}
	auth, err := oozie.LoadHadoopAuth(cfg.HadoopConf, hadoopconf.Options{Keytab: cfg.Keytab, Principal: cfg.Principal}, cfg.OozieSPN)
	if err != nil {
		return nil, err
	}
	return map[string]external.Service{
		workflow.ServiceCommand: cmd,
		workflow.ServiceOozie:   oozie.NewService(d, nil, auth...),
	}, nil
}

// attemptLister lists a slot's attempts through the external service its
// workflow names (the API's GET /slot-attempts, the UI's details). A
// service that keeps no list wraps scheduler.ErrNoAttempts.
type attemptLister map[string]external.Service

func (m attemptLister) Attempts(ctx context.Context, w *workflow.Workflow, id slot.ID) ([]scheduler.Attempt, error) {
	al, ok := m[w.ExternalService.Type].(scheduler.AttemptLister)
	if !ok {
		return nil, fmt.Errorf("%w: %q", scheduler.ErrNoAttempts, w.ExternalService.Type)
	}
	return al.Attempts(ctx, w, id)
}
