-- The database connection of the fence row's last writer. Keep in step
-- with ../mysql/00013_fence_holder_connection.sql (SQLite has one writer,
-- this process: always 0).

-- +goose Up
ALTER TABLE token_fence ADD COLUMN holder_conn INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE token_fence DROP COLUMN holder_conn;
