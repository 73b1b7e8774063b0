-- Wrong passwords per account, counted in the store so that every node
-- together checks at most what the throttle allows (docs/PROTOCOL.md,
-- "Accounts"). fails counts the attempts since the last right password
-- (an attempt is counted before its password is checked), last_us is the
-- store's clock at the last one, until_us the time before which no
-- password of the account is checked (0: none). A right password or a new
-- password deletes the row.

-- +goose Up
CREATE TABLE login_failures (
    user_id  BIGINT NOT NULL PRIMARY KEY,
    fails    INT NOT NULL,
    last_us  BIGINT NOT NULL,
    until_us BIGINT NOT NULL,
    CONSTRAINT fk_login_failures_user FOREIGN KEY (user_id) REFERENCES users (user_id) ON DELETE CASCADE
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE login_failures;
