-- What each node last said of itself, and when. Keep in step with
-- ../mysql/00012_node_health.sql.

-- +goose Up
ALTER TABLE nodes ADD COLUMN health TEXT NULL;
ALTER TABLE nodes ADD COLUMN health_us INTEGER NULL;

-- +goose Down
ALTER TABLE nodes DROP COLUMN health_us;
ALTER TABLE nodes DROP COLUMN health;
