-- What each node last said of itself (empty: it serves; otherwise a short
-- line such as "most critical sections fail" or the links the coordinator
-- avoids) and when, on the store's clock in microseconds: `ringnode
-- status` shows a node in trouble, or one that stopped reporting, instead
-- of a whole ring. NULL until the node reports.

-- +goose Up
ALTER TABLE nodes ADD COLUMN health VARCHAR(255) NULL, ADD COLUMN health_us BIGINT NULL;

-- +goose Down
ALTER TABLE nodes DROP COLUMN health, DROP COLUMN health_us;
