package bmc

import (
	"encoding/json"
	"net/http"
)

// Redfish message IDs from the Base registry that the emulator answers with.
const (
	msgGeneralError        = "Base.1.16.GeneralError"
	msgMalformedJSON       = "Base.1.16.MalformedJSON"
	msgPropertyUnknown     = "Base.1.16.PropertyUnknown"
	msgPropertyValueNotIn  = "Base.1.16.PropertyValueNotInList"
	msgActionParamMissing  = "Base.1.16.ActionParameterMissing"
	msgResourceNotFound    = "Base.1.16.ResourceNotFound"
	msgNoValidSession      = "Base.1.16.NoValidSession"
	msgOperationNotAllowed = "Base.1.16.OperationNotAllowed"
	msgResourceInUse       = "Base.1.16.ResourceInUse"
	msgServiceUnavailable  = "Base.1.16.ServiceTemporarilyUnavailable"
	msgPropertyValueType   = "Base.1.16.PropertyValueTypeError"
	msgParamNotSupported   = "Base.1.16.ActionParameterNotSupported"
)

// writeError answers in Redfish's error body format (DSP0266 "Error
// responses"): an error object with a code, a message and
// @Message.ExtendedInfo naming the property at fault.
func writeError(w http.ResponseWriter, status int, messageID, message string, property string) {
	info := map[string]any{
		"@odata.type": "#Message.v1_1_1.Message",
		"MessageId":   messageID,
		"Message":     message,
		"Severity":    "Warning",
		"Resolution":  "Correct the request and resubmit it.",
	}
	if property != "" {
		info["RelatedProperties"] = []string{"#/" + property}
	}
	if status >= 500 {
		info["Severity"] = "Critical"
		info["Resolution"] = "Retry the operation later."
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{
			"code":                  messageID,
			"message":               message,
			"@Message.ExtendedInfo": []any{info},
		},
	})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// notFound answers 404 for the resource asked.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, msgResourceNotFound, "The requested resource "+r.URL.Path+" was not found.", "")
}
