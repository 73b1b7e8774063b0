-- Ring topology (resource P) and message queue (resource Q).
-- Times are stored as microseconds since the Unix epoch (UTC).

-- +goose Up
CREATE TABLE nodes (
    node_id      BIGINT       NOT NULL PRIMARY KEY,
    host         VARCHAR(255) NOT NULL,
    coord_port   INT          NOT NULL,
    client_port  INT          NOT NULL,
    successor_id BIGINT       NULL,
    added_us     BIGINT       NOT NULL,
    CONSTRAINT fk_nodes_successor FOREIGN KEY (successor_id) REFERENCES nodes (node_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The single coordinator row: node_id NULL means no coordinator. The epoch
-- only grows, by compare-and-set.
CREATE TABLE ring_coordinator (
    id         TINYINT NOT NULL PRIMARY KEY,
    node_id    BIGINT  NULL,
    epoch      BIGINT  NOT NULL,
    changed_us BIGINT  NOT NULL,
    CONSTRAINT ck_ring_coordinator_single CHECK (id = 1)
) ENGINE=InnoDB;
INSERT INTO ring_coordinator (id, node_id, epoch, changed_us) VALUES (1, NULL, 0, 0);

-- Every claimed epoch, once: the primary key makes two coordinators for one
-- epoch impossible.
CREATE TABLE coordinator_history (
    epoch      BIGINT NOT NULL PRIMARY KEY,
    node_id    BIGINT NOT NULL,
    claimed_us BIGINT NOT NULL
) ENGINE=InnoDB;

-- The newest token stamp used by a critical section on the queue.
CREATE TABLE token_fence (
    id         TINYINT NOT NULL PRIMARY KEY,
    generation BIGINT  NOT NULL,
    seq        BIGINT  NOT NULL,
    changed_us BIGINT  NOT NULL,
    CONSTRAINT ck_token_fence_single CHECK (id = 1)
) ENGINE=InnoDB;
INSERT INTO token_fence (id, generation, seq, changed_us) VALUES (1, 0, 0, 0);

CREATE TABLE users (
    user_id       BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name          VARCHAR(128) NOT NULL,
    password_hash VARCHAR(255) NULL,
    created_us    BIGINT       NOT NULL,
    UNIQUE KEY uq_users_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE chat_groups (
    group_id   BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name       VARCHAR(128) NOT NULL,
    created_us BIGINT       NOT NULL,
    UNIQUE KEY uq_chat_groups_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE group_members (
    group_id  BIGINT NOT NULL,
    user_id   BIGINT NOT NULL,
    joined_us BIGINT NOT NULL,
    PRIMARY KEY (group_id, user_id),
    KEY ix_group_members_user (user_id),
    CONSTRAINT fk_group_members_group FOREIGN KEY (group_id) REFERENCES chat_groups (group_id),
    CONSTRAINT fk_group_members_user FOREIGN KEY (user_id) REFERENCES users (user_id)
) ENGINE=InnoDB;

-- A user is logged in at most at one node across the ring.
CREATE TABLE presence (
    user_id  BIGINT NOT NULL PRIMARY KEY,
    node_id  BIGINT NOT NULL,
    since_us BIGINT NOT NULL,
    KEY ix_presence_node (node_id),
    CONSTRAINT fk_presence_user FOREIGN KEY (user_id) REFERENCES users (user_id)
) ENGINE=InnoDB;

-- msg_seq is the global order of messages.
CREATE TABLE messages (
    msg_seq     BIGINT     NOT NULL AUTO_INCREMENT PRIMARY KEY,
    msg_id      CHAR(36)   NOT NULL,
    sender_id   BIGINT     NOT NULL,
    to_user_id  BIGINT     NULL,
    to_group_id BIGINT     NULL,
    content     MEDIUMTEXT NOT NULL,
    sent_us     BIGINT     NOT NULL,
    stored_us   BIGINT     NOT NULL,
    node_id     BIGINT     NOT NULL,
    UNIQUE KEY uq_messages_msg_id (msg_id),
    KEY ix_messages_to_user (to_user_id, msg_seq),
    KEY ix_messages_to_group (to_group_id, msg_seq),
    KEY ix_messages_stored (stored_us),
    CONSTRAINT fk_messages_sender FOREIGN KEY (sender_id) REFERENCES users (user_id),
    CONSTRAINT fk_messages_to_user FOREIGN KEY (to_user_id) REFERENCES users (user_id),
    CONSTRAINT fk_messages_to_group FOREIGN KEY (to_group_id) REFERENCES chat_groups (group_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per (recipient, message) until the recipient has it.
CREATE TABLE recipients (
    user_id      BIGINT NOT NULL,
    msg_seq      BIGINT NOT NULL,
    delivered_us BIGINT NULL,
    PRIMARY KEY (user_id, msg_seq),
    KEY ix_recipients_msg (msg_seq),
    CONSTRAINT fk_recipients_user FOREIGN KEY (user_id) REFERENCES users (user_id),
    CONSTRAINT fk_recipients_msg FOREIGN KEY (msg_seq) REFERENCES messages (msg_seq) ON DELETE CASCADE
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE recipients;
DROP TABLE messages;
DROP TABLE presence;
DROP TABLE group_members;
DROP TABLE chat_groups;
DROP TABLE users;
DROP TABLE token_fence;
DROP TABLE coordinator_history;
DROP TABLE ring_coordinator;
DROP TABLE nodes;
