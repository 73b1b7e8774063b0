-- The database server each node uses (host:port; with several servers in
-- its DSN, the one its connections go to), as the node last recorded it:
-- `ringnode status` shows it. NULL until the node records it.

-- +goose Up
ALTER TABLE nodes ADD COLUMN db_server VARCHAR(255) NULL;

-- +goose Down
ALTER TABLE nodes DROP COLUMN db_server;
