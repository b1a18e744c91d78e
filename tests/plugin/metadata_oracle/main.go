// Device metadata (KEP-5304) as the Go helper writes it
// (k8s.io/dynamic-resource-allocation kubeletplugin, metadataWriter, at the
// version go.mod pins): the judge of the DRA framework's metadata files.
// Reads one request's metadata as JSON on standard input
//
//	{"name": ..., "namespace": ..., "uid": ..., "generation": 1,
//	 "podClaimName": ... (optional), "driver": ..., "request": ...,
//	 "versions": [...],
//	 "devices": [{"driver": ..., "pool": ..., "name": ...,
//	              "attributes": {<name>: <resource.k8s.io/v1 DeviceAttribute>}}]}
//
// and prints the metadata file's bytes: the object encoded once for each
// version with the helper's scheme and pretty JSON serializer, each
// followed by a newline (metadataWriter.encodeMetadataStream), then, after
// a line "---", the container path of the base request's file (metadata
// helpers, as writeCDISpec names it).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/api/metadata/install"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

type input struct {
	Name         string   `json:"name"`
	Namespace    string   `json:"namespace"`
	UID          string   `json:"uid"`
	Generation   int64    `json:"generation"`
	PodClaimName *string  `json:"podClaimName"`
	Driver       string   `json:"driver"`
	Request      string   `json:"request"`
	Versions     []string `json:"versions"`
	Devices      []struct {
		Driver     string                                                    `json:"driver"`
		Pool       string                                                    `json:"pool"`
		Name       string                                                    `json:"name"`
		Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	} `json:"devices"`
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fail(err)
	}
	scheme := install.NewScheme()
	factory := runtimeserializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(factory.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		fail(fmt.Errorf("no JSON serializer"))
	}
	devices := make([]metadata.Device, 0, len(in.Devices))
	for _, d := range in.Devices {
		devices = append(devices, metadata.Device{Driver: d.Driver, Pool: d.Pool, Name: d.Name, Attributes: d.Attributes})
	}
	dm := &metadata.DeviceMetadata{
		ObjectMeta: metav1.ObjectMeta{
			Name:       in.Name,
			Namespace:  in.Namespace,
			UID:        types.UID(in.UID),
			Generation: in.Generation,
		},
		PodClaimName: in.PodClaimName,
		Requests:     []metadata.DeviceMetadataRequest{{Name: in.Request, Devices: devices}},
	}
	var buf bytes.Buffer
	for _, version := range in.Versions {
		gv := schema.GroupVersion{Group: metadata.GroupName, Version: version}
		if !scheme.IsVersionRegistered(gv) {
			fail(fmt.Errorf("version %s is not registered", version))
		}
		data, err := runtime.Encode(factory.EncoderForVersion(info.PrettySerializer, gv), dm)
		if err != nil {
			fail(err)
		}
		buf.Write(data)
		buf.WriteByte('\n')
	}
	os.Stdout.Write(buf.Bytes())
	fmt.Println("---")
	// The file of the base request (writeCDISpec's requestName).
	request := resourceclaim.BaseRequestRef(in.Request)
	if in.PodClaimName != nil && *in.PodClaimName != "" {
		fmt.Println(metadata.ResourceClaimTemplateFilePath(in.Driver, *in.PodClaimName, request))
	} else {
		fmt.Println(metadata.ResourceClaimFilePath(in.Driver, in.Name, request))
	}
}
