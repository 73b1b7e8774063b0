-- A counter that the test-only mutual-exclusion probe (ringnode run
-- --mutex-probe) reads and rewrites in every critical section, in separate
-- statements: overlapping critical sections would lose increments.

-- +goose Up
CREATE TABLE mutex_probe (
    id      TINYINT NOT NULL PRIMARY KEY,
    counter BIGINT  NOT NULL
) ENGINE=InnoDB;
INSERT INTO mutex_probe (id, counter) VALUES (1, 0);

-- +goose Down
DROP TABLE mutex_probe;
