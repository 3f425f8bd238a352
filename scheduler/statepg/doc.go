// Package statepg is the scheduler's state store on PostgreSQL: every slot
// state, rerun mark, paused flag, submit intent, workflow owner and register
// is a row, the schema is created and migrated by the versioned SQL files
// embedded from migrations/, and every write the engine makes is one
// transaction, durable when the call returns. See docs/postgres.md.
package statepg
