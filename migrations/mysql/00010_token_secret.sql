-- Every token generation has a secret, made by the store with the
-- generation and read only from the store: a token proves its stamp with
-- an HMAC under it, so that a peer holding the cluster key but not the
-- store cannot forge a token of the current generation (docs/ARCHITECTURE.md,
-- "Security model").

-- +goose Up
ALTER TABLE token_fence ADD COLUMN secret VARCHAR(64) NOT NULL DEFAULT '';
UPDATE token_fence SET secret = SHA2(CONCAT(UUID(), RAND(), NOW(6)), 256);

-- +goose Down
ALTER TABLE token_fence DROP COLUMN secret;
