package server

import (
	"log/slog"

	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/schema"
)

// externalServices builds the external services by type (the
// schema.ExternalService.Type a workflow names). The engine looks each
// workflow's service up in this map; a workflow whose type is missing
// waits with an error on /trigger-status, it never fails.
//
// Adding a service: build it from cfg (cfg.Defaults names the installation
// defaults, cfg.HadoopConf the Hadoop configuration) and put it under its
// schema type, e.g. schema.ServiceOozie.
func externalServices(cfg Config, log *slog.Logger) (map[string]external.Service, error) {
	cmd, err := command.New(cfg.Jobs, command.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return map[string]external.Service{
		schema.ServiceCommand: cmd,
	}, nil
}
