-- The coordinator lease of the lease election method: the coordinator row's
-- holder keeps the role until lease_until_us (microseconds on the store's
-- clock), renewing it; anyone may take the role over once it has expired.
-- 0 means the coordinator was elected by a voting method and holds no lease.

-- +goose Up
ALTER TABLE ring_coordinator ADD COLUMN lease_until_us BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE ring_coordinator DROP COLUMN lease_until_us;
