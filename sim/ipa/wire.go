package ipa

// Version is the agent version the lab's IPA reports.
const Version = "9.4.1"

// Header versions IPA sends: lookup at 1.62 (the token is returned or
// masked), heartbeats at 1.68.
const (
	lookupVersion    = "1.62"
	heartbeatVersion = "1.68"
)

// Command is what Ironic posts to /v1/commands/.
type Command struct {
	Name   string         `json:"name"`
	Params map[string]any `json:"params"`
}

// Result is a command as the agent lists it and answers a post with.
type Result struct {
	ID      string         `json:"id"`
	Name    string         `json:"command_name"`
	Status  string         `json:"command_status"`
	Error   *CommandError  `json:"command_error"`
	Outcome map[string]any `json:"command_result"`
}

// Command statuses.
const (
	StatusRunning   = "RUNNING"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
)

// CommandError is why a command failed.
type CommandError struct {
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
}

// fault is an error answer: Ironic reads faultstring.
type fault struct {
	Code   string `json:"faultcode"`
	String string `json:"faultstring"`
}

// heartbeat is the body of POST /v1/heartbeat/{node}.
type heartbeat struct {
	CallbackURL  string `json:"callback_url"`
	AgentToken   string `json:"agent_token"`
	AgentVersion string `json:"agent_version"`
}

// lookupAnswer is the part of GET /v1/lookup the agent reads.
type lookupAnswer struct {
	Node struct {
		UUID string `json:"uuid"`
	} `json:"node"`
	Config struct {
		HeartbeatTimeout float64 `json:"heartbeat_timeout"`
		AgentToken       *string `json:"agent_token"`
	} `json:"config"`
}

// step is a clean or deploy step as the agent lists and Ironic echoes it.
type step struct {
	Step            string `json:"step"`
	Priority        int    `json:"priority"`
	Interface       string `json:"interface"`
	RebootRequested bool   `json:"reboot_requested"`
	Abortable       bool   `json:"abortable"`
}
