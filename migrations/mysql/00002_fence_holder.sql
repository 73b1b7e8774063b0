-- The token fence records which node used the newest stamp, so that two
-- nodes holding copies of the same stamp cannot both write.

-- +goose Up
ALTER TABLE token_fence ADD COLUMN holder BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE token_fence DROP COLUMN holder;
