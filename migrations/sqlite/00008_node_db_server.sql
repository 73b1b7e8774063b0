-- The database server each node uses. Keep in step with
-- ../mysql/00008_node_db_server.sql.

-- +goose Up
ALTER TABLE nodes ADD COLUMN db_server TEXT NULL;

-- +goose Down
ALTER TABLE nodes DROP COLUMN db_server;
