-- The database connection of the transaction that last wrote the fence row
-- (CONNECTION_ID()): a fenced transaction waiting for the row's lock reads
-- it, uncommitted, and ends a transaction left behind by an older token
-- holder (internal/store/fencewait.go). 0 where nobody wrote it yet.

-- +goose Up
ALTER TABLE token_fence ADD COLUMN holder_conn BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE token_fence DROP COLUMN holder_conn;
