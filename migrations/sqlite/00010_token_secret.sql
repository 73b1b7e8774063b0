-- Every token generation has a secret, made by the store with the
-- generation and read only from the store: a token proves its stamp with
-- an HMAC under it, so that a peer holding the cluster key but not the
-- store cannot forge a token of the current generation (docs/ARCHITECTURE.md,
-- "Security model").

-- +goose Up
ALTER TABLE token_fence ADD COLUMN secret TEXT NOT NULL DEFAULT '';
UPDATE token_fence SET secret = lower(hex(randomblob(32)));

-- +goose Down
ALTER TABLE token_fence DROP COLUMN secret;
