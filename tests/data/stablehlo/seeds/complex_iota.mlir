func.func @main(%arg0: tensor<3x4xcomplex<f32>>) -> (tensor<3x4xcomplex<f32>>, tensor<3x4xcomplex<f64>>) {
  %0 = stablehlo.iota dim = 1 : tensor<3x4xcomplex<f32>>
  %1 = stablehlo.add %0, %arg0 : tensor<3x4xcomplex<f32>>
  %2 = stablehlo.iota dim = 0 : tensor<3x4xcomplex<f64>>
  return %1, %2 : tensor<3x4xcomplex<f32>>, tensor<3x4xcomplex<f64>>
}
